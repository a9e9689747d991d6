"""Write toolhost tool plugins in Python, built with componentize-py.

One file, no dependencies: put its directory on componentize-py's path
(``-p``) beside your app and write plain functions::

    from dataclasses import dataclass
    from toolhost_plugin import Context, Output, InvalidArguments, tool
    from toolhost_plugin import Tool  # the component's export: keep this import

    @dataclass
    class Stats:
        words: int
        lines: int

    @tool(read_only=True, idempotent=True)
    def text_stats(text: str) -> Output[Stats]:
        \"\"\"Counts the words and lines of a text.

        Args:
            text: The text.
        \"\"\"
        stats = Stats(len(text.split()), len(text.splitlines()))
        return Output(f"{stats.words} words", structured=stats)

Build it against the contract (``wit/plugin.wit``)::

    componentize-py -d plugin.wit -w tool-plugin componentize app -p . -p SDK_DIR -o app.wasm

What you get (the same as the Rust SDK, ``toolhost-sdk``):

- ``@tool(...)``: the tool's name is the function's, its description the
  docstring's text (before ``Args:``), its input JSON Schema comes from the
  parameters' type hints (``str int float bool list[T] dict[str, T]
  Optional[T] Literal[...]``, an ``Enum``, a dataclass or a ``TypedDict``;
  ``Annotated[T, "description"]`` or a Google-style ``Args:`` section
  describes a parameter). A parameter annotated ``Context`` receives the
  call's context and is not part of the schema. A single parameter whose
  type is a dataclass takes the whole arguments object.
- The return value: a ``str`` is the text for the model; an ``Output``
  carries text plus optional ``details`` (JSON for user interfaces, the
  model never sees it), ``structured`` content and ``content`` blocks
  (``Content.image(png_bytes, "image/png")``, audio, resource links,
  embedded resources: contract 0.3.0; an MCP client receives the text then
  the blocks, a model that reads images sees the images). Returning a
  dataclass or ``TypedDict``, or ``Output[T]`` with one, declares ``T``'s
  schema as the tool's output schema; ``output_schema=`` gives one by hand.
- ``raise InvalidArguments("...")`` when the model should change its
  arguments, ``raise Failed("...")`` when the tool could not do its job; any
  other exception becomes ``Failed`` (its traceback goes to the host's log).
- ``Context``: ``call_id``, ``session_id``, ``agent``, and the host's
  ``log``, ``config``, ``config_keys`` and ``progress``.

Everything is worked out when the module is imported, which componentize-py
does once at build time (the snapshot holds it): a schema the helper cannot
build fails the build, and a call does no schema work.

Off the component (plain ``python3``, for unit tests) the host functions
fall back: ``log`` writes to stderr, ``config`` reads the values given to
``Context(config=...)``, ``progress`` does nothing; ``call(name, args)`` runs
a tool as the host would.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import json
import os
import re
import sys
import traceback
import typing
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar

try:  # Inside the component: the bindings componentize-py generates.
    from componentize_py_types import Err as _Err
    from wit_world import exports as _exports
    from wit_world.imports import host as _host
    from wit_world.imports import types as _types

    _ToolBase: Any = _exports.Tool
except ImportError:  # Plain Python (unit tests): no host.
    _Err = None
    _host = None
    _types = None
    _ToolBase = object

__all__ = [
    "Content",
    "Context",
    "Failed",
    "InvalidArguments",
    "Output",
    "Tool",
    "ToolError",
    "call",
    "config",
    "config_keys",
    "log",
    "progress",
    "specs",
    "tool",
]

T = TypeVar("T")

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_LEVELS = ("trace", "debug", "info", "warn", "error")


class ToolError(Exception):
    """Why a tool call failed; raise one of its two kinds."""

    kind = "failed"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = str(message)


class InvalidArguments(ToolError):
    """The arguments matched the schema but are still unusable; the message
    says what to change (the model is expected to retry)."""

    kind = "invalid-arguments"


class Failed(ToolError):
    """The tool ran and could not do its job."""

    kind = "failed"


class Content:
    """One content block of a result, as in MCP: an image, an audio clip, a
    resource link, an embedded resource, or more text (contract 0.3.0).
    Make one with the static methods; ``audience`` (``"user"``,
    ``"assistant"``), ``priority`` (0.0 to 1.0), ``last_modified`` (ISO 8601)
    and ``meta`` (a dict, MCP's ``_meta``) are optional on each::

        Content.image(png_bytes, "image/png", audience=["user"])
        Content.resource_link("file:///report.csv", "report.csv", mime_type="text/csv")
    """

    __slots__ = ("kind", "fields", "audience", "priority", "last_modified", "meta")

    def __init__(self, kind: str, fields: Dict[str, Any], audience=None, priority=None, last_modified=None, meta=None):
        self.kind = kind
        self.fields = fields
        self.audience = list(audience or [])
        for a in self.audience:
            if a not in ("user", "assistant"):
                raise ValueError(f"audience {a!r} is not 'user' or 'assistant'")
        self.priority = None if priority is None else float(priority)
        self.last_modified = last_modified
        if meta is not None and not isinstance(meta, dict):
            raise TypeError("meta must be a dict (MCP's _meta object)")
        self.meta = meta

    @staticmethod
    def text(text: str, **options) -> "Content":
        return Content("text", {"text": str(text)}, **options)

    @staticmethod
    def image(data: bytes, mime_type: str, **options) -> "Content":
        """An image: its bytes and MIME type (models read image/png,
        image/jpeg, image/gif and image/webp)."""
        return Content("image", {"data": bytes(data), "mime_type": str(mime_type)}, **options)

    @staticmethod
    def audio(data: bytes, mime_type: str, **options) -> "Content":
        return Content("audio", {"data": bytes(data), "mime_type": str(mime_type)}, **options)

    @staticmethod
    def resource_link(uri: str, name: str, title=None, description=None, mime_type=None, size=None, **options) -> "Content":
        fields = {"uri": uri, "name": name, "title": title, "description": description, "mime_type": mime_type, "size": size}
        return Content("resource_link", fields, **options)

    @staticmethod
    def embedded_text(uri: str, text: str, mime_type=None, **options) -> "Content":
        return Content("resource", {"uri": uri, "mime_type": mime_type, "text": str(text)}, **options)

    @staticmethod
    def embedded_blob(uri: str, data: bytes, mime_type=None, **options) -> "Content":
        return Content("resource", {"uri": uri, "mime_type": mime_type, "blob": bytes(data)}, **options)

    def __repr__(self) -> str:
        return f"Content({self.kind!r})"

    def _wit(self):
        """The block as the contract's ``content-block``."""
        f = self.fields
        if self.kind == "text":
            content = _types.Content_Text(f["text"])
        elif self.kind in ("image", "audio"):
            media = _types.Media(data=f["data"], mime_type=f["mime_type"])
            content = _types.Content_Image(media) if self.kind == "image" else _types.Content_Audio(media)
        elif self.kind == "resource_link":
            content = _types.Content_ResourceLink(_types.ResourceLink(**f))
        else:
            body = _types.ResourceBody_Text(f["text"]) if "text" in f else _types.ResourceBody_Blob(f["blob"])
            content = _types.Content_Embedded(
                _types.EmbeddedResource(uri=f["uri"], mime_type=f["mime_type"], body=body)
            )
        annotations = None
        if self.audience or self.priority is not None or self.last_modified is not None:
            annotations = _types.ContentAnnotations(
                audience=[_types.Audience[a.upper()] for a in self.audience],
                priority=self.priority,
                last_modified=self.last_modified,
            )
        meta = None if self.meta is None else json.dumps(self.meta)
        return _types.ContentBlock(content=content, annotations=annotations, meta=meta)


class Output(Generic[T]):
    """A tool's result: ``output`` (concise text for the model), optional
    ``details`` (any JSON value, for user interfaces and logs), optional
    ``structured`` content (a dataclass, TypedDict or JSON value), and
    optional ``content`` blocks (a list of ``Content``): the result as an MCP
    client receives it is then ``output`` as a text block (unless empty)
    followed by these.

    Annotate a tool ``-> Output[Stats]`` to declare ``Stats``'s schema as the
    tool's output schema."""

    __slots__ = ("output", "details", "structured", "content")

    def __init__(self, output: str, details: Any = None, structured: Any = None, content: Optional[List[Content]] = None):
        self.output = str(output)
        self.details = details
        self.structured = structured
        blocks = list(content or [])
        for b in blocks:
            if not isinstance(b, Content):
                raise TypeError(f"content holds Content blocks, not {type(b).__name__}")
        if blocks and self.output:
            blocks.insert(0, Content.text(self.output))
        self.content = blocks

    def __repr__(self) -> str:
        return f"Output({self.output!r}, details={self.details!r}, structured={self.structured!r}, content={self.content!r})"


def log(level: str, message: str) -> None:
    """Writes to the host's log (level: trace, debug, info, warn, error),
    tagged with the plugin's name. Off the component: stderr."""
    if level not in _LEVELS:
        level = "info"
    if _host is None:
        print(f"[{level}] {message}", file=sys.stderr)
        return
    _host.log(_types.LogLevel[level.upper()], str(message))


def config(key: str) -> Optional[str]:
    """One of the plugin's configuration values (manifest ``[config]``,
    overridden by the host's configuration), or None."""
    if _host is None:
        return None
    return _host.get_config(key)


def config_keys() -> List[str]:
    """Every configuration key the plugin has a value for."""
    if _host is None:
        return []
    return list(_host.config_keys())


def progress(message: str, fraction: Optional[float] = None) -> None:
    """Reports progress of a long call to the user interface (never to the
    model); ``fraction`` is clamped to 0.0..1.0, NaN counts as unknown."""
    if fraction is not None:
        fraction = float(fraction)
        fraction = None if fraction != fraction else min(1.0, max(0.0, fraction))
    if _host is not None:
        _host.progress(str(message), fraction)


class Context:
    """Who is calling, and the host's log, configuration and progress.

    In unit tests, ``Context(config={"greeting": "Hi"})`` gives the context
    its own configuration values (it then never asks the host)."""

    __slots__ = ("call_id", "session_id", "agent", "_config")

    def __init__(
        self,
        call_id: str = "test",
        session_id: Optional[str] = None,
        agent: Optional[str] = None,
        config: Optional[Dict[str, str]] = None,
    ):
        self.call_id = call_id
        self.session_id = session_id
        self.agent = agent
        self._config = config

    def log(self, level: str, message: str) -> None:
        """See the module's ``log``."""
        log(level, message)

    def config(self, key: str) -> Optional[str]:
        """See the module's ``config``."""
        if self._config is not None:
            return self._config.get(key)
        return config(key)

    def config_keys(self) -> List[str]:
        """See the module's ``config_keys``."""
        if self._config is not None:
            return sorted(self._config)
        return config_keys()

    def progress(self, message: str, fraction: Optional[float] = None) -> None:
        """See the module's ``progress``."""
        progress(message, fraction)


# ---------------------------------------------------------------- schemas


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def _hints(obj: Any) -> Dict[str, Any]:
    return typing.get_type_hints(obj, include_extras=True)


def schema_of(tp: Any, where: str = "a value") -> Dict[str, Any]:
    """The JSON Schema of a type hint. Raises TypeError for a type that has
    no JSON form (at import time, so the build fails and says which)."""
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema = dict(schema_of(args[0], where))
        for extra in args[1:]:
            if isinstance(extra, str):
                schema["description"] = extra
            elif isinstance(extra, dict):
                schema.update(extra)
        return schema
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is type(None):
        return {"type": "null"}
    if origin is typing.Literal:
        values = list(args)
        schema: Dict[str, Any] = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1:
            schema["type"] = schema_of(kinds.pop(), where)["type"]
        return schema
    if origin is typing.Union or (sys.version_info >= (3, 10) and _is_union_type(tp)):
        options = [a for a in args if a is not type(None)]
        nullable = len(options) != len(args)
        if len(options) == 1:
            inner = schema_of(options[0], where)
            if nullable:
                if isinstance(inner.get("type"), str) and "enum" not in inner:
                    return {**inner, "type": [inner["type"], "null"]}
                return {"anyOf": [inner, {"type": "null"}]}
            return inner
        schemas = [schema_of(a, where) for a in options]
        if nullable:
            schemas.append({"type": "null"})
        return {"anyOf": schemas}
    if origin in (list, collections.abc.Sequence) or tp is list:
        items = schema_of(args[0], where) if args else {}
        return {"type": "array", "items": items}
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        if args and args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str (JSON object keys)")
        values = schema_of(args[1], where) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": values}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return schema_of(typing.Literal[tuple(m.value for m in tp)], where)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _record_schema(tp)
    if _is_typeddict(tp):
        return _record_schema(tp)
    raise TypeError(f"{where}: no JSON Schema for the type {tp!r}")


def _is_union_type(tp: Any) -> bool:
    import types as _pytypes

    return isinstance(tp, _pytypes.UnionType)


def _record_schema(tp: type) -> Dict[str, Any]:
    """A dataclass's or TypedDict's object schema."""
    hints = _hints(tp)
    properties: Dict[str, Any] = {}
    required: List[str] = []
    if dataclasses.is_dataclass(tp):
        for f in dataclasses.fields(tp):
            properties[f.name] = schema_of(hints.get(f.name, Any), f"{tp.__name__}.{f.name}")
            if "description" in f.metadata:
                properties[f.name]["description"] = str(f.metadata["description"])
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            elif f.default is not dataclasses.MISSING and _jsonable(f.default):
                properties[f.name]["default"] = f.default
    else:
        keys = getattr(tp, "__required_keys__", frozenset(hints))
        for name, hint in hints.items():
            properties[name] = schema_of(hint, f"{tp.__name__}.{name}")
            if name in keys:
                required.append(name)
    schema: Dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    doc = inspect.getdoc(tp)
    if doc and not doc.startswith(tp.__name__ + "("):  # not the dataclass's generated doc
        schema["description"] = doc
    return schema


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _to_json(value: Any) -> Any:
    """A dataclass, TypedDict, Enum or JSON value as a plain JSON value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _convert(value: Any, tp: Any, path: str) -> Any:
    """Checks a JSON value against a type hint and builds dataclasses and
    enums from it. The host has validated the arguments against the schema
    already; this is the second line, and a mismatch is InvalidArguments."""
    if tp is Any or tp is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _convert(value, args[0], path)
    if origin is typing.Union or _is_union_type(tp):
        if value is None and type(None) in args:
            return None
        for option in args:
            if option is type(None):
                continue
            try:
                return _convert(value, option, path)
            except InvalidArguments:
                continue
        raise InvalidArguments(f"{path}: {_show(value)} matches none of the allowed types")
    if origin is typing.Literal:
        if value not in args:
            raise InvalidArguments(f"{path}: must be one of {list(args)!r}, not {_show(value)}")
        return value
    simple = {str: str, bool: bool, type(None): type(None)}
    if tp in simple:
        if type(value) is not simple[tp]:
            raise InvalidArguments(f"{path}: expected {_kind(tp)}, got {_show(value)}")
        return value
    if tp is int:
        if type(value) is float and value.is_integer():
            return int(value)
        if type(value) is not int:
            raise InvalidArguments(f"{path}: expected an integer, got {_show(value)}")
        return value
    if tp is float:
        if type(value) not in (int, float):
            raise InvalidArguments(f"{path}: expected a number, got {_show(value)}")
        return float(value)
    if origin in (list, collections.abc.Sequence) or tp is list:
        if not isinstance(value, list):
            raise InvalidArguments(f"{path}: expected an array, got {_show(value)}")
        item = args[0] if args else Any
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        if not isinstance(value, dict):
            raise InvalidArguments(f"{path}: expected an object, got {_show(value)}")
        item = args[1] if len(args) == 2 else Any
        return {k: _convert(v, item, f"{path}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise InvalidArguments(
                f"{path}: must be one of {[m.value for m in tp]!r}, not {_show(value)}"
            ) from None
    if (dataclasses.is_dataclass(tp) and isinstance(tp, type)) or _is_typeddict(tp):
        if not isinstance(value, dict):
            raise InvalidArguments(f"{path}: expected an object, got {_show(value)}")
        hints = _hints(tp)
        fields = {}
        for name, v in value.items():
            if name not in hints:
                raise InvalidArguments(f"{path}: unknown property {name!r}")
            fields[name] = _convert(v, hints[name], f"{path}.{name}")
        if dataclasses.is_dataclass(tp):
            missing = [
                f.name
                for f in dataclasses.fields(tp)
                if f.name not in fields
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING
            ]
            if missing:
                raise InvalidArguments(f"{path}: missing required property {missing[0]!r}")
            return tp(**fields)
        return fields
    return value


def _kind(tp: Any) -> str:
    return {str: "a string", bool: "a boolean", type(None): "null"}.get(tp, repr(tp))


def _show(value: Any) -> str:
    text = json.dumps(value) if _jsonable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- tools


def _split_doc(doc: str) -> tuple:
    """(description, {parameter: description}) from a docstring with an
    optional Google-style ``Args:`` section."""
    description: List[str] = []
    params: Dict[str, str] = {}
    current = None
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if not stripped:
                current = None
                continue
            m = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", stripped)
            if m and line.startswith((" ", "\t")):
                current = m.group(1)
                params[current] = m.group(3)
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
            else:
                in_args = False
                description.append(line)
        else:
            description.append(line)
    return "\n".join(description).strip(), params


class _Registered:
    """One tool: its spec (worked out once) and how to call it."""

    def __init__(
        self,
        func: Callable,
        name: str,
        description: str,
        annotations: Dict[str, bool],
        output_schema: Optional[Dict[str, Any]],
    ):
        where = f"tool {name!r}"
        if not _NAME.match(name):
            raise ValueError(f"{where}: a tool name must match ^[a-zA-Z0-9_-]{{1,64}}$")
        doc_text, param_docs = _split_doc(inspect.getdoc(func) or "")
        self.func = func
        self.name = name
        self.description = description or doc_text
        if not self.description:
            raise ValueError(f"{where}: give it a description (a docstring or description=)")
        self.annotations = annotations
        hints = _hints(func)
        params = list(inspect.signature(func).parameters.values())
        self.context_param: Optional[str] = None
        self.params: Dict[str, Any] = {}
        self.record: Optional[type] = None
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"{where}: *args and **kwargs have no schema; name each parameter")
            hint = hints.get(p.name, Any)
            if hint is Context:
                self.context_param = p.name
                continue
            self.params[p.name] = (hint, p.default)
        if len(self.params) == 1:
            (only, (hint, default)), = self.params.items()
            if (
                dataclasses.is_dataclass(hint)
                and isinstance(hint, type)
                and default is inspect.Parameter.empty
            ):
                self.record = hint
        if self.record is not None:
            schema = _record_schema(self.record)
            if self.description and "description" in schema:
                del schema["description"]
        else:
            properties: Dict[str, Any] = {}
            required: List[str] = []
            for pname, (hint, default) in self.params.items():
                prop = schema_of(hint, f"{where}, parameter {pname!r}")
                if pname in param_docs and "description" not in prop:
                    prop = {**prop, "description": param_docs[pname]}
                if default is inspect.Parameter.empty:
                    required.append(pname)
                elif _jsonable(_to_json(default)) and default is not None:
                    prop = {**prop, "default": _to_json(default)}
                properties[pname] = prop
            schema = {"type": "object", "properties": properties, "required": required}
        schema["additionalProperties"] = False
        self.input_schema = schema
        ret = hints.get("return", Any)
        self.output_type: Any = None
        if output_schema is None:
            target = ret
            if typing.get_origin(ret) is Output and typing.get_args(ret):
                target = typing.get_args(ret)[0]
            if (dataclasses.is_dataclass(target) and isinstance(target, type)) or _is_typeddict(target):
                output_schema = _record_schema(target)
                self.output_type = target
        if output_schema is not None and output_schema.get("type") != "object":
            raise ValueError(f"{where}: an output schema's top level must be \"type\": \"object\"")
        self.output_schema = output_schema
        self.input_schema_text = json.dumps(schema)
        self.output_schema_text = None if output_schema is None else json.dumps(output_schema)

    def run(self, cx: Context, args: Any) -> Output:
        """Calls the function with the arguments (a JSON object) and returns
        its Output; raises ToolError."""
        if not isinstance(args, dict):
            raise InvalidArguments(f"the arguments must be a JSON object, got {_show(args)}")
        kwargs: Dict[str, Any] = {}
        if self.record is not None:
            (pname,) = self.params
            kwargs[pname] = _convert(args, self.record, "arguments")
        else:
            for key in args:
                if key not in self.params:
                    raise InvalidArguments(
                        f"unknown argument {key!r}; this tool takes: {', '.join(self.params) or 'nothing'}"
                    )
            for pname, (hint, default) in self.params.items():
                if pname in args:
                    kwargs[pname] = _convert(args[pname], hint, pname)
                elif default is inspect.Parameter.empty:
                    raise InvalidArguments(f"missing required argument {pname!r}")
        if self.context_param is not None:
            kwargs[self.context_param] = cx
        result = self.func(**kwargs)
        return self._output(result)

    def _output(self, result: Any) -> Output:
        if isinstance(result, Output):
            out = result
        elif isinstance(result, str):
            out = Output(result)
        elif self.output_schema is not None:
            value = _to_json(result)
            out = Output(json.dumps(value, ensure_ascii=False), structured=value)
        else:
            out = Output(json.dumps(_to_json(result), ensure_ascii=False))
        if self.output_schema is not None and out.structured is None:
            raise Failed(f"the tool {self.name} declares an output schema but returned no structured content")
        return out


_TOOLS: Dict[str, _Registered] = {}


def tool(
    func: Optional[Callable] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    read_only: bool = False,
    idempotent: bool = False,
    destructive: bool = False,
    open_world: bool = False,
    output_schema: Optional[Dict[str, Any]] = None,
):
    """Registers a function as one of the plugin's tools (see the module's
    documentation). Use it bare (``@tool``) or with options."""

    def register(f: Callable) -> Callable:
        registered = _Registered(
            f,
            name or f.__name__,
            description or "",
            {
                "read_only": read_only,
                "idempotent": idempotent,
                "destructive": destructive,
                "open_world": open_world,
            },
            output_schema,
        )
        if registered.name in _TOOLS:
            raise ValueError(f"two tools are named {registered.name!r}")
        _TOOLS[registered.name] = registered
        return f

    if func is not None:
        return register(func)
    return register


def specs() -> List[Dict[str, Any]]:
    """What ``describe`` returns, as plain dicts (for unit tests)."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": t.input_schema,
            "annotations": dict(t.annotations),
            "output_schema": t.output_schema,
        }
        for t in _TOOLS.values()
    ]


def call(name: str, args: Any, cx: Optional[Context] = None) -> Output:
    """Runs the tool ``name`` as the host would (for unit tests): ``args``
    is a dict or JSON text. Raises InvalidArguments or Failed."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError) as e:
            raise InvalidArguments(f"the arguments are not valid JSON: {e}") from None
    t = _TOOLS.get(name)
    if t is None:
        raise Failed(f"unknown tool {name!r}; this plugin provides: {', '.join(_TOOLS)}")
    try:
        return t.run(cx or Context(), args)
    except ToolError:
        raise
    except RecursionError:
        raise Failed(f"the tool {name} recursed too deeply") from None
    except Exception as e:  # noqa: BLE001 - every failure becomes a tool error
        log("error", f"{name}: {traceback.format_exc(limit=20)}")
        raise Failed(f"{type(e).__name__}: {e}") from None


def _start_in_granted_directory() -> None:
    """Makes a relative path relative to the first directory the host
    granted, as in a Rust plugin: the interpreter was snapshotted at build
    time with ``/`` as its working directory, and the host names that
    directory in ``PWD``. Without a grant there is nothing to change to."""
    pwd = os.environ.get("PWD")
    if pwd and os.getcwd() != pwd:
        try:
            os.chdir(pwd)
        except OSError:
            pass


class Tool(_ToolBase):
    """The component's ``tool`` export, built from the registered tools.
    componentize-py looks for it in your app module: import it there."""

    def describe(self):
        return [
            _types.ToolSpec(
                name=t.name,
                description=t.description,
                input_schema=t.input_schema_text,
                annotations=_types.Annotations(**t.annotations),
                output_schema=t.output_schema_text,
            )
            for t in _TOOLS.values()
        ]

    def execute(self, context, name, args_json):
        _start_in_granted_directory()
        cx = Context(context.call_id, context.session_id, context.agent)
        try:
            out = call(name, args_json, cx)
            details = None if out.details is None else json.dumps(_to_json(out.details))
            structured = None if out.structured is None else json.dumps(_to_json(out.structured))
        except InvalidArguments as e:
            raise _Err(_types.ToolError_InvalidArguments(e.message))
        except ToolError as e:
            raise _Err(_types.ToolError_Failed(e.message))
        except (TypeError, ValueError) as e:
            raise _Err(_types.ToolError_Failed(f"the result is not JSON: {e}"))
        content = [b._wit() for b in out.content]
        return _types.ToolOutput(output=out.output, details=details, structured=structured, content=content)
