"""A small MCP client over the official Python SDK (`mcp` on PyPI), driven by cohost's tests.

    python client.py stdio COHOST_BIN [ARGS...]   # spawns `COHOST_BIN ARGS` (e.g. `cohost mcp`),
                                                  # passing on COHOST_HOME / COHOST_LISTEN
    python client.py http URL TOKEN               # streamable HTTP with `Authorization: Bearer TOKEN`

Reads a plan from the first line of stdin: a JSON list of steps, each
    {"tool": NAME, "arguments": {...}}
or, to read events until one of a type shows up,
    {"tool": "events", "arguments": {...}, "until_type": "turn.completed", "max_calls": 30}
(each call continues from the previous answer's `next`), or, to call a tool until a field of
its answer has one of some values (polling, 0.3 s apart),
    {"tool": "task_status", "arguments": {...}, "until": {"/task/state": ["completed"]}}
or, to stop until the test says go (a line on stdin), telling it the saved values,
    {"pause": LABEL}
A step may save values of its (last) answer for later steps,
    "save": {"task": "/task/taskId"}
and any argument string "$name" is replaced by the saved value.

Prints JSON lines on stdout, flushed one by one:
    {"tools": [{"name", "description", "inputSchema", "outputSchema"}, ...]}
    {"calling": NAME, "index": I}
    {"index": I, "elapsed": S, "isError": B, "structured": {...}, "text": "..."}
      or {"index": I, "elapsed": S, "rpcError": {"code", "message"}}
    {"paused": LABEL, "vars": {...}}
    {"done": true}
or, when `initialize` fails, {"initializeError": {"code", "message"}} then {"done": true}.
The SDK checks each successful call's structuredContent against the tool's outputSchema; when
one does not conform, the client prints {"index": I, "outputSchemaViolation": "..."} and fails.
"""

import json
import os
import sys
import time

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def result_json(result):
    text = "".join(getattr(block, "text", "") for block in result.content)
    return {
        "isError": bool(result.is_error),
        "structured": result.structured_content,
        "text": text,
    }


async def call(session, index, name, arguments):
    emit({"calling": name, "index": index})
    start = time.monotonic()
    try:
        result = await session.call_tool(name, arguments)
        answer = result_json(result)
    except MCPError as error:
        answer = {"rpcError": {"code": error.code, "message": error.message}}
    except RuntimeError as error:
        # The SDK checks a successful result's structuredContent against the tool's
        # outputSchema: a result that does not conform ends the run (the test fails).
        emit({"index": index, "outputSchemaViolation": str(error)})
        raise
    answer["index"] = index
    answer["elapsed"] = time.monotonic() - start
    emit(answer)
    return answer


def pointer(value, path):
    for part in path.strip("/").split("/"):
        if isinstance(value, list):
            value = value[int(part)] if part.isdigit() and int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def substitute(value, saved):
    if isinstance(value, str) and value.startswith("$") and value[1:] in saved:
        return saved[value[1:]]
    if isinstance(value, dict):
        return {k: substitute(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, saved) for v in value]
    return value


async def run_plan(session, plan, stdin):
    try:
        await session.initialize()
    except MCPError as error:
        # What the SDK reports when the server refuses the connection (a bad token).
        emit({"initializeError": {"code": error.code, "message": error.message}})
        emit({"done": True})
        return
    tools = await session.list_tools()
    emit(
        {
            "tools": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": tool.input_schema,
                    "outputSchema": tool.output_schema,
                }
                for tool in tools.tools
            ]
        }
    )
    saved = {}
    for index, step in enumerate(plan):
        if "pause" in step:
            emit({"paused": step["pause"], "index": index, "vars": saved})
            await anyio.to_thread.run_sync(stdin.readline)
            continue
        arguments = substitute(dict(step.get("arguments", {})), saved)
        until_type = step.get("until_type")
        until = step.get("until")
        answer = None
        if until_type is None and until is None:
            answer = await call(session, index, step["tool"], arguments)
        elif until_type is not None:
            for _ in range(step.get("max_calls", 30)):
                answer = await call(session, index, step["tool"], arguments)
                structured = answer.get("structured") or {}
                if answer.get("isError") or "rpcError" in answer:
                    break
                if any(e.get("type") == until_type for e in structured.get("events", [])):
                    break
                arguments["after"] = structured.get("next", arguments.get("after", 0))
        else:
            for _ in range(step.get("max_calls", 200)):
                answer = await call(session, index, step["tool"], arguments)
                structured = answer.get("structured") or {}
                if answer.get("isError") or "rpcError" in answer:
                    break
                if all(pointer(structured, path) in values for path, values in until.items()):
                    break
                await anyio.sleep(0.3)
        for name, path in step.get("save", {}).items():
            saved[name] = pointer((answer or {}).get("structured") or {}, path)
    emit({"done": True})


async def main():
    stdin = sys.stdin
    plan = json.loads(stdin.readline() or "[]")
    mode = sys.argv[1]
    if mode == "stdio":
        # The SDK passes the child only a default environment; COHOST_HOME is how the
        # bridge finds the daemon, as an MCP client's server config would set it.
        env = {k: os.environ[k] for k in ("COHOST_HOME", "COHOST_LISTEN") if k in os.environ}
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await run_plan(session, plan, stdin)
    elif mode == "http":
        url, token = sys.argv[2], sys.argv[3]
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await run_plan(session, plan, stdin)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    anyio.run(main)
