"""A toolhost tool plugin written in Python with the helper module
`sdk/python/toolhost_plugin.py`, built with componentize-py.

Two tools: `text_stats` returns structured output (its output schema comes
from the `Stats` dataclass), and `read_lines` reads a file the host granted
(WASI preopened directories: the plugin sees nothing else). Built by
`cargo xtask plugins-foreign` (and `cargo xtask test`) into
`target/plugins-py/text-stats.wasm`:

    componentize-py -d wit/plugin.wit -w tool-plugin componentize app \
        -p . -p ../../../sdk/python -o text-stats.wasm
"""

from dataclasses import dataclass
from typing import Annotated

from toolhost_plugin import Context, Failed, InvalidArguments, Output, tool
from toolhost_plugin import Tool  # noqa: F401 - the component's export


@dataclass
class Stats:
    words: int
    lines: int
    characters: int


@tool(read_only=True, idempotent=True)
def text_stats(text: Annotated[str, "The text."]) -> Output[Stats]:
    """Counts the words, lines and characters of a text."""
    stats = Stats(words=len(text.split()), lines=len(text.splitlines()), characters=len(text))
    return Output(
        f"{stats.words} words, {stats.lines} lines, {stats.characters} characters",
        structured=stats,
    )


@tool(read_only=True, idempotent=True)
def read_lines(
    cx: Context,
    path: str,
    count: Annotated[int, {"minimum": 1, "maximum": 1000}] = 10,
) -> Output:
    """Reads the first lines of a text file in a directory the host granted.

    Args:
        path: The file, absolute or relative to the granted directory.
        count: How many lines (default 10).
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for _, line in zip(range(count), f)]
    except FileNotFoundError:
        raise InvalidArguments(f"no file {path} (in a granted directory)") from None
    except OSError as e:
        raise Failed(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise Failed(f"{path} is not UTF-8 text") from None
    cx.log("debug", f"read {len(lines)} lines of {path}")
    return Output("\n".join(lines), details={"lines": len(lines)})
