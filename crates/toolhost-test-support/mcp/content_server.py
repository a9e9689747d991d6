"""An MCP server built on the official MCP Python SDK (its low-level
`Server`, over stdio) whose one tool returns every kind of content block MCP
has — text, image, audio, a resource link with icons, embedded text and blob
resources — with annotations and `_meta` on the blocks, `_meta` on the
result and structured content: what a gateway must pass on as it was sent.
Run it with the Python that has the SDK (`TOOLHOST_TEST_PYTHON`).

Tools:
  every_block   the result below (`RESULT`)
  failing       an `isError` result with a text and an image block
"""

import anyio
import mcp.server.stdio
import mcp_types as types
from mcp.server.lowlevel import Server

# A 1x1 PNG and a short WAV header, as base64.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="

RESULT = {
    "content": [
        {"type": "text", "text": "Every block:", "annotations": {"audience": ["user", "assistant"], "priority": 0.9}},
        {"type": "image", "data": PNG, "mimeType": "image/png",
         "annotations": {"audience": ["user"], "lastModified": "2025-01-12T15:00:58Z"},
         "_meta": {"example.com/caption": "a dot"}},
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///project/README.md", "name": "README.md",
         "title": "The read-me", "description": "What the project is", "mimeType": "text/markdown",
         "size": 1234, "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}]},
        {"type": "resource", "resource": {"uri": "file:///project/notes.txt", "mimeType": "text/plain",
                                          "text": "remember the milk", "_meta": {"example.com/rev": 3}},
         "annotations": {"priority": 0.25}},
        {"type": "resource", "resource": {"uri": "file:///project/data.bin",
                                          "mimeType": "application/octet-stream", "blob": "AAECAw=="}},
    ],
    "structuredContent": {"blocks": 6, "ok": True},
    "_meta": {"example.com/request": "r-17", "example.com/nested": {"a": [1, 2]}},
}

FAILING = {
    "content": [
        {"type": "text", "text": "it broke"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
    ],
    "isError": True,
}


async def list_tools(ctx, params):
    return types.ListToolsResult(
        tools=[
            types.Tool(name="every_block", description="Returns every kind of content block.",
                       input_schema={"type": "object"}),
            types.Tool(name="failing", description="Fails with a text and an image.",
                       input_schema={"type": "object"}),
        ]
    )


async def call_tool(ctx, params):
    result = RESULT if params.name == "every_block" else FAILING
    return types.CallToolResult.model_validate(result)


server = Server("content", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
