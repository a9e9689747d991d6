"""Drives toolhost's MCP server with the official MCP Python SDK (`mcp` on PyPI).

Run by `crates/toolhost-cli/tests/all/mcp.rs` with the SDK that `cargo xtask
test` installs. One scenario per run; prints one JSON object (the report the
Rust test checks) on stdout's last line.

    python mcp_client.py --mode auto|legacy|2026-07-28 [--url URL [--token T]] \
        SCENARIO [--answer accept|decline|remember|name=NAME|none[,...]] [--url-arg U] [--copy SRC DST] \
        [--call NAME JSON]... [--direct COMMAND --prefix P] -- HOST_COMMAND...
"""

import argparse
import asyncio
import json
import shutil
import sys
import time

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def result_json(r):
    return {
        "is_error": bool(r.is_error),
        "text": "".join(c.text for c in r.content if getattr(c, "type", "") == "text"),
        "structured": r.structured_content,
        "meta": r.meta,
    }


def server(args):
    if args.url:
        if args.token:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.token}"}, timeout=30)
            return streamable_http_client(args.url, http_client=http)
        return args.url
    return StdioServerParameters(command=args.host[0], args=args.host[1:])


async def basics(args):
    async with Client(server(args), mode=args.mode) as c:
        listed = await c.list_tools()
        tools = {
            t.name: {
                "read_only": t.annotations.read_only_hint if t.annotations else None,
                "destructive": t.annotations.destructive_hint if t.annotations else None,
                "has_output_schema": t.output_schema is not None,
                "schema_type": t.input_schema.get("type"),
            }
            for t in listed.tools
        }
        report = {"version": c.protocol_version, "tools": tools, "calls": {}}
        for name, tool, arguments in [
            ("ok", "calculate", {"expression": "2*(3+4)"}),
            ("invalid", "calculate", {"expr": "1"}),
            ("unknown", "calculat", {}),
            ("denied", "http_get", {"url": "http://127.0.0.1:9/"}),
        ]:
            try:
                report["calls"][name] = result_json(await c.call_tool(tool, arguments))
            except Exception as e:  # a protocol error: the report says so
                report["calls"][name] = {"exception": repr(e)}
        if "panic" in tools:
            report["calls"]["panic"] = result_json(await c.call_tool("panic", {"message": "boom"}))
        return report


async def operator_wait(args):
    """A call whose ask goes to the operator: the progress notes it gets
    while it waits, and its result once the operator answered."""
    seen = []

    async def on_progress(value, total, message):
        seen.append({"progress": value, "total": total, "message": message})

    async with Client(server(args), mode=args.mode) as c:
        r = await c.call_tool("calculate", {"expression": "2*(3+4)"}, progress_callback=on_progress)
        return {"version": c.protocol_version, "progress": seen, "result": result_json(r)}


async def ask(args):
    """Calls `calculate` (or the `--call`), answering each question with the
    next of `--answer`'s comma-separated answers (the last one repeats)."""
    answers = args.answer.split(",")
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        answer = answers[min(len(asked), len(answers)) - 1]
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if answer == "remember":
            return types.ElicitResult(action="accept", content={"approve": True, "remember": True})
        if answer.startswith("name="):
            return types.ElicitResult(action="accept", content={"name": answer[len("name="):]})
        return types.ElicitResult(action="decline")

    callback = None if args.answer == "none" else elicit

    name, arguments = args.call[0] if args.call else ("calculate", '{"expression": "1+1"}')
    async with Client(server(args), mode=args.mode, elicitation_callback=callback) as c:
        r = await c.call_tool(name, json.loads(arguments))
        return {"version": c.protocol_version, "asked": asked, "result": result_json(r)}


async def progress(args):
    seen = []

    async def on_progress(value, total, message):
        seen.append({"progress": value, "total": total, "message": message})

    async with Client(server(args), mode=args.mode) as c:
        r = await c.call_tool("http_get", {"url": args.url_arg}, progress_callback=on_progress)
        return {"version": c.protocol_version, "progress": seen, "result": result_json(r)}


async def cancel(args):
    async with Client(server(args), mode=args.mode) as c:
        started = time.monotonic()
        with anyio.move_on_after(1.0) as scope:
            await c.call_tool("spin", {})
        cancelled_after = time.monotonic() - started
        # The same plugin, which may run one sandbox at a time: this call
        # only gets one if the cancelled call's sandbox was stopped.
        try:
            r = result_json(await c.call_tool("echo", {"text": "next"}, read_timeout_seconds=15))
        except Exception as e:
            r = {"exception": repr(e)}
        return {
            "version": c.protocol_version,
            "cancelled": scope.cancelled_caught,
            "cancelled_after_s": cancelled_after,
            "next": r,
        }


async def reload(args):
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root if hasattr(message, "root") else message, types.ToolListChangedNotification
        ):
            changed.set()
        elif isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(server(args), mode=args.mode, message_handler=on_message) as c:
        before = sorted(t.name for t in (await c.list_tools()).tools)
        how = "notification"
        if c.protocol_version >= "2026-07-28":
            how = "subscription"
            async with c.listen(tools_list_changed=True) as sub:
                shutil.copy(args.copy[0], args.copy[1])
                with anyio.move_on_after(20):
                    async for _event in sub:
                        changed.set()
                        break
        else:
            shutil.copy(args.copy[0], args.copy[1])
            with anyio.move_on_after(20):
                await changed.wait()
        after = sorted(t.name for t in (await c.list_tools(cache_mode="bypass") if c.protocol_version >= "2026-07-28" else await c.list_tools()).tools)
        return {"version": c.protocol_version, "how": how, "changed": changed.is_set(), "before": before, "after": after}


async def gateway(args):
    """Lists the tools and makes each `--call NAME JSON`."""
    async with Client(server(args), mode=args.mode) as c:
        listed = await c.list_tools()
        report = {"tools": sorted(t.name for t in listed.tools), "calls": {}}
        for name, arguments in args.call or []:
            report["calls"][name] = result_json(await c.call_tool(name, json.loads(arguments)))
        return report


def raw(r):
    """A result as the wire had it (MCP JSON), less what a client's models add."""
    value = r.model_dump(by_alias=True, exclude_none=True, mode="json")
    value.pop("resultType", None)
    return value


async def content(args):
    """Makes each `--call NAME JSON` and reports every result whole (MCP
    JSON); with `--direct COMMAND`, makes the same calls (names without the
    gateway's `--prefix`) on the server that command starts, to compare."""
    async def calls(target, prefix):
        async with Client(target, mode=args.mode) as c:
            listed = await c.list_tools()
            report = {"tools": sorted(t.name for t in listed.tools), "calls": {}}
            for name, arguments in args.call or []:
                tool = name[len(prefix):] if prefix and name.startswith(prefix) else name
                report["calls"][name] = raw(await c.call_tool(tool, json.loads(arguments)))
            return report

    report = await calls(server(args), "")
    if args.direct:
        import shlex

        command = shlex.split(args.direct)
        direct = StdioServerParameters(command=command[0], args=command[1:])
        report["direct"] = (await calls(direct, args.prefix or ""))["calls"]
    return report


async def search(args):
    """Lists the tools, searches twice, calls the first tool found by its
    name (it was not listed) and each `--call NAME JSON`."""
    async with Client(server(args), mode=args.mode) as c:
        listed = await c.list_tools()
        report = {"tools": [t.name for t in listed.tools], "calls": {}}
        for name, query in [("currency", "convert money to another currency"), ("sms", "send a text message (sms) to a phone")]:
            report[name] = result_json(await c.call_tool("search_tools", {"query": query}))
        found = (report["currency"]["structured"] or {}).get("tools", [])
        if found:
            arguments = {"amount": "1", "from": "USD", "to": "EUR"}
            report["called"] = result_json(await c.call_tool(found[0]["name"], arguments))
        for name, arguments in args.call or []:
            report["calls"][name] = result_json(await c.call_tool(name, json.loads(arguments)))
        return report


async def oauth(args):
    """The OAuth dance against a server that asks for it, as the SDK's
    `OAuthClientProvider` does it on its own: the 401's challenge, the
    protected resource metadata, the authorization server's metadata,
    dynamic registration, authorization code with PKCE and the resource
    indicator. The person's part is scripted: a browser that follows the
    authorization server's redirects (whose sign-in and consent
    `provider.mjs` scripts) for the account `--login`, until it is sent to
    the redirect URI. Then lists the tools and makes each `--call`."""
    from urllib.parse import parse_qs, quote, urljoin, urlparse

    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
    from mcp.shared.auth import OAuthClientMetadata

    class Memory(TokenStorage):
        def __init__(self):
            self.tokens, self.info = None, None

        async def get_tokens(self):
            return self.tokens

        async def set_tokens(self, tokens):
            self.tokens = tokens

        async def get_client_info(self):
            return self.info

        async def set_client_info(self, info):
            self.info = info

    # Never fetched: the browser stops when it is sent there.
    redirect_uri = "http://127.0.0.1:9/callback"
    seen = {"authorization_urls": []}
    got = {}

    async def redirect_handler(url):
        seen["authorization_urls"].append(url)
        url = f"{url}&login_hint={quote(args.login)}"
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            for _ in range(10):
                r = await browser.get(url)
                location = r.headers.get("location")
                if r.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise RuntimeError(f"the authorization server answered {r.status_code}: {r.text[:500]}")
                location = urljoin(url, location)
                if location.startswith(redirect_uri):
                    q = parse_qs(urlparse(location).query)
                    if "error" in q:
                        raise RuntimeError(f"authorization refused: {q}")
                    got.update(code=q["code"][0], state=q.get("state", [None])[0], iss=q.get("iss", [None])[0])
                    return
                url = location
        raise RuntimeError("too many redirects")

    async def callback_handler():
        return AuthorizationCodeResult(**got)

    auth = OAuthClientProvider(
        server_url=args.url,
        client_metadata=OAuthClientMetadata(
            client_name="toolhost test",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http = httpx2.AsyncClient(auth=auth, timeout=30)
    async with Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as c:
        listed = await c.list_tools()
        report = {
            "version": c.protocol_version,
            "tools": sorted(t.name for t in listed.tools),
            "calls": {},
            # What the client asked the authorization server for (no secret:
            # the code and the token never leave this process).
            "asked": [
                {k: v[0] for k, v in parse_qs(urlparse(u).query).items() if k in ("resource", "scope", "code_challenge_method")}
                for u in seen["authorization_urls"]
            ],
        }
        for name, arguments in args.call or []:
            report["calls"][name] = result_json(await c.call_tool(name, json.loads(arguments)))
        return report


SCENARIOS = {
    "oauth": oauth,
    "basics": basics,
    "ask": ask,
    "progress": progress,
    "operator_wait": operator_wait,
    "cancel": cancel,
    "reload": reload,
    "gateway": gateway,
    "search": search,
    "content": content,
}


def main():
    argv = sys.argv[1:]
    host = []
    if "--" in argv:
        i = argv.index("--")
        argv, host = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--mode", default="auto")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--login", default="alice")
    p.add_argument("--answer", default="none")
    p.add_argument("--url-arg")
    p.add_argument("--copy", nargs=2)
    p.add_argument("--call", nargs=2, action="append")
    p.add_argument("--direct")
    p.add_argument("--prefix")
    args = p.parse_args(argv)
    args.host = host
    report = asyncio.run(SCENARIOS[args.scenario](args))
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
