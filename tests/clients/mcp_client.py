"""A real MCP client (the official Python SDK, `mcp` on PyPI) against `memviz mcp`.

Usage: python3 mcp_client.py MEMVIZ_BINARY SNAPSHOT RANK_DIR
Starts the server over stdio, lists its tools, calls them on the fixtures and prints one JSON
object with what it saw; exits 1 (with the reason) when something is off.
"""
import asyncio, json, sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(binary, snapshot, ranks):
    seen = {}
    params = StdioServerParameters(command=binary, args=["mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            info = getattr(init, "server_info", None) or getattr(init, "serverInfo")
            seen["server"] = info.name
            tools = (await session.list_tools()).tools
            seen["tools"] = sorted(t.name for t in tools)
            schema = lambda t: getattr(t, "output_schema", None) or getattr(t, "outputSchema", None)
            seen["output_schemas"] = sorted(t.name for t in tools if schema(t))

            async def call(name, **args):
                # The SDK checks a result's structured content against the tool's output schema.
                r = await session.call_tool(name, args)
                text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                err = getattr(r, "is_error", None)
                err = bool(getattr(r, "isError", False) if err is None else err)
                if not err:
                    structured = getattr(r, "structured_content", None) or getattr(r, "structuredContent", None)
                    assert structured == json.loads(text), f"{name}: the structured content is not the text's JSON"
                return err, text

            err, text = await call("stats", input=snapshot)
            assert not err, text
            seen["stats_peak"] = json.loads(text)["devices"][0]["peak"]["bytes"]
            err, text = await call("at", input=snapshot, peak=True, group_by="category")
            assert not err, text
            at = json.loads(text)["devices"][0]
            seen["at_total"] = at["total_bytes"]
            seen["at_categories"] = sorted(g["label"] for g in at["groups"])
            err, text = await call("find", input=snapshot, frame="_init_group")
            assert not err, text
            seen["find_count"] = json.loads(text)["devices"][0]["count"]
            err, text = await call("steps", input=snapshot)
            assert not err, text
            seen["steps"] = len(json.loads(text)["devices"][0]["steps"])
            err, text = await call("ranks", inputs=[ranks], threshold=50)
            assert not err, text
            seen["outliers"] = [o["rank"] for o in json.loads(text)["outliers"]]
            answered = []
            for name, args in [
                ("range", dict(input=snapshot, range="100..900")),
                ("diff", dict(a=snapshot, b=snapshot, threshold=5)),
                ("segments", dict(input=snapshot, end=True)),
                ("oom", dict(input=snapshot)),
                ("at", dict(input=snapshot, action=1000, list=True, stacks=True)),
            ]:
                err, text = await call(name, **args)
                assert not err, f"{name}: {text}"
                answered.append(name)
            seen["answered"] = answered
            # Errors: one line, and the server lives on.
            err, text = await call("at", input=snapshot, action="999999999")
            seen["bad_action"] = [err, text]
            err, text = await call("at", input="/nonexistent.pickle", peak=True)
            seen["missing_file"] = [err, text]
            err, text = await call("range", input=snapshot, range="nonsense")
            seen["bad_range"] = [err, text]
            err, text = await call("stats", input=snapshot)
            seen["after_errors"] = (not err) and json.loads(text)["devices"][0]["peak"]["bytes"]
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
