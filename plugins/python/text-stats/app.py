"""A toolhost tool plugin written in Python, built with componentize-py.

Two tools: `text_stats` returns structured output (contract 0.2.0), and
`read_lines` reads a file the host granted (WASI preopened directories: the
plugin sees nothing else). Built by `cargo xtask test` into
`target/plugins-py/text-stats.wasm`:

    componentize-py -d wit/plugin.wit -w tool-plugin componentize app -o text-stats.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host, types

READ_ONLY = types.Annotations(read_only=True, idempotent=True, destructive=False, open_world=False)


def schema(properties, required):
    return json.dumps({"type": "object", "properties": properties, "required": required})


SPECS = [
    types.ToolSpec(
        name="text_stats",
        description="Counts the words, lines and characters of a text.",
        input_schema=schema({"text": {"type": "string", "description": "The text."}}, ["text"]),
        annotations=READ_ONLY,
        output_schema=schema(
            {"words": {"type": "integer"}, "lines": {"type": "integer"}, "characters": {"type": "integer"}},
            ["words", "lines", "characters"],
        ),
    ),
    types.ToolSpec(
        name="read_lines",
        description="Reads the first lines of a text file in a directory the host granted.",
        input_schema=schema(
            {
                "path": {"type": "string", "description": "The file, absolute or relative to the granted directory."},
                "count": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "How many lines (default 10)."},
            },
            ["path"],
        ),
        annotations=READ_ONLY,
        output_schema=None,
    ),
]


def text_stats(args):
    text = args["text"]
    stats = {"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)}
    output = f"{stats['words']} words, {stats['lines']} lines, {stats['characters']} characters"
    return types.ToolOutput(output=output, details=None, structured=json.dumps(stats))


def read_lines(args):
    path = args["path"]
    count = args.get("count", 10)
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(count), f)]
    except FileNotFoundError:
        raise Err(types.ToolError_InvalidArguments(f"no file {path} (in a granted directory)"))
    except OSError as e:
        raise Err(types.ToolError_Failed(f"cannot read {path}: {e.strerror}"))
    host.log(types.LogLevel.DEBUG, f"read {len(lines)} lines of {path}")
    return types.ToolOutput(output="\n".join(lines), details=json.dumps({"lines": len(lines)}), structured=None)


TOOLS = {"text_stats": text_stats, "read_lines": read_lines}


class Tool(exports.Tool):
    def describe(self):
        return SPECS

    def execute(self, context, name, args_json):
        tool = TOOLS.get(name)
        if tool is None:
            raise Err(types.ToolError_InvalidArguments(f"no tool named {name}"))
        return tool(json.loads(args_json))
