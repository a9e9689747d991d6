"""Unit tests of the Python helper, run natively (no component, no host):
`python3 -m unittest discover -s sdk/python/tests` (the CLI's
`languages` tests run them)."""

import dataclasses
import enum
import json
import os
import sys
import unittest
from typing import Annotated, Dict, List, Literal, Optional, TypedDict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import toolhost_plugin as th  # noqa: E402


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Summary(TypedDict):
    total: int
    names: List[str]


class Registry(unittest.TestCase):
    def setUp(self):
        th._TOOLS.clear()

    def spec(self, name):
        return next(s for s in th.specs() if s["name"] == name)

    def test_type_hints_become_the_input_schema_with_required_and_defaults(self):
        @th.tool(read_only=True)
        def search(
            cx: th.Context,
            query: Annotated[str, "What to look for."],
            limit: int = 10,
            exact: bool = False,
            ratio: Optional[float] = None,
            tags: List[str] = [],
            weights: Dict[str, float] = {},
            mode: Literal["fast", "slow"] = "fast",
            color: Color = Color.RED,
        ) -> str:
            """Searches.

            Args:
                limit: How many at most.
            """
            return ""

        s = self.spec("search")
        self.assertEqual(s["description"], "Searches.")
        self.assertTrue(s["annotations"]["read_only"])
        props = s["input_schema"]["properties"]
        self.assertNotIn("cx", props, "the context is not an argument")
        self.assertEqual(s["input_schema"]["required"], ["query"])
        self.assertFalse(s["input_schema"]["additionalProperties"])
        self.assertEqual(props["query"], {"type": "string", "description": "What to look for."})
        self.assertEqual(props["limit"], {"type": "integer", "description": "How many at most.", "default": 10})
        self.assertEqual(props["exact"]["type"], "boolean")
        self.assertEqual(props["ratio"]["type"], ["number", "null"])
        self.assertEqual(props["tags"], {"type": "array", "items": {"type": "string"}, "default": []})
        self.assertEqual(props["weights"]["additionalProperties"], {"type": "number"})
        self.assertEqual(props["mode"]["enum"], ["fast", "slow"])
        self.assertEqual(props["color"], {"enum": ["red", "blue"], "type": "string", "default": "red"})
        self.assertIsNone(s["output_schema"])

    def test_a_dataclass_parameter_takes_the_whole_arguments_object(self):
        @th.tool
        def norm(p: Point) -> int:
            """The L1 norm."""
            return abs(p.x) + abs(p.y)

        s = self.spec("norm")
        self.assertEqual(s["input_schema"]["required"], ["x"])
        self.assertEqual(th.call("norm", {"x": -3, "y": 4}).output, "7")
        with self.assertRaises(th.InvalidArguments):
            th.call("norm", {"y": 4})

    def test_a_dataclass_or_typeddict_return_declares_the_output_schema(self):
        @th.tool
        def summary(names: List[str]) -> Summary:
            """Counts names."""
            return {"total": len(names), "names": sorted(names)}

        @th.tool
        def point() -> th.Output[Point]:
            """A point."""
            return th.Output("the origin", structured=Point(0, 0), details={"why": "test"})

        self.assertEqual(self.spec("summary")["output_schema"]["required"], ["total", "names"])
        out = th.call("summary", '{"names": ["b", "a"]}')
        self.assertEqual(out.structured, {"total": 2, "names": ["a", "b"]})
        self.assertEqual(json.loads(out.output), out.structured)
        self.assertEqual(self.spec("point")["output_schema"]["properties"]["y"]["default"], 0)
        out = th.call("point", {})
        self.assertEqual(out.output, "the origin")
        self.assertEqual(th._to_json(out.structured), {"x": 0, "y": 0})

    def test_content_blocks_follow_the_output_text(self):
        @th.tool(read_only=True)
        def logo() -> th.Output:
            """The logo."""
            png = b"\x89PNG\r\n\x1a\n"
            return th.Output("The logo:", content=[th.Content.image(png, "image/png", audience=["user"])])

        out = th.call("logo", {})
        self.assertEqual([b.kind for b in out.content], ["text", "image"])
        self.assertEqual(out.content[0].fields["text"], "The logo:")
        self.assertEqual(out.content[1].fields["mime_type"], "image/png")
        self.assertEqual(out.content[1].audience, ["user"])
        self.assertEqual(th.Output("plain").content, [], "no blocks: the text alone")
        with self.assertRaises(ValueError):
            th.Content.text("x", audience=["everyone"])
        with self.assertRaises(TypeError):
            th.Output("x", content=["not a block"])

    def test_a_tool_with_an_output_schema_must_return_structured_content(self):
        @th.tool(output_schema={"type": "object"})
        def lazy() -> str:
            """Forgets."""
            return "text only"

        with self.assertRaises(th.Failed):
            th.call("lazy", {})

    def test_arguments_that_do_not_fit_the_hints_are_invalid_arguments(self):
        @th.tool
        def add(a: int, b: int = 1) -> int:
            """Adds."""
            return a + b

        self.assertEqual(th.call("add", {"a": 2}).output, "3")
        for bad in ['{"a": "2"}', '{"b": 1}', '{"a": 1, "c": 2}', "[1]", "{not json"]:
            with self.assertRaises(th.InvalidArguments, msg=bad):
                th.call("add", bad)

    def test_a_plain_exception_becomes_failed_and_invalid_arguments_stays_itself(self):
        @th.tool
        def boom(kind: str) -> str:
            """Fails."""
            if kind == "invalid":
                raise th.InvalidArguments("change kind")
            raise KeyError("nope")

        with self.assertRaises(th.InvalidArguments):
            th.call("boom", {"kind": "invalid"})
        with self.assertRaisesRegex(th.Failed, "KeyError"):
            th.call("boom", {"kind": "other"})
        with self.assertRaisesRegex(th.Failed, "unknown tool"):
            th.call("nothing", {})

    def test_the_context_reads_its_own_config_in_tests(self):
        @th.tool
        def greet(cx: th.Context, name: str) -> str:
            """Greets."""
            cx.progress("halfway", 0.5)
            return f"{cx.config('greeting') or 'Hello'}, {name} ({cx.call_id})"

        cx = th.Context("c1", config={"greeting": "Hi"})
        self.assertEqual(th.call("greet", {"name": "Ada"}, cx).output, "Hi, Ada (c1)")
        self.assertEqual(cx.config_keys(), ["greeting"])

    def test_bad_tools_fail_at_registration(self):
        with self.assertRaisesRegex(ValueError, "name"):
            th.tool(name="no spaces")(lambda: "")
        with self.assertRaisesRegex(ValueError, "description"):

            @th.tool
            def undocumented() -> str:
                return ""

        with self.assertRaisesRegex(TypeError, "no JSON Schema"):

            @th.tool
            def weird(x: complex) -> str:
                """Weird."""
                return ""

        @th.tool
        def once() -> str:
            """Once."""
            return ""

        with self.assertRaisesRegex(ValueError, "two tools"):
            th.tool(name="once", description="again")(lambda: "")


if __name__ == "__main__":
    unittest.main()
