"""Conformance: the official MCP and A2A Python SDKs (unchanged, pinned in
requirements.txt beside this file) against a running stepgraph server.

Started by test/conformance/interop_test.go, which sets STEPGRAPH_URL and
STEPGRAPH_API_KEY. Each test runs its own event loop (asyncio.run).
"""

import asyncio
import json
import os
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory, create_text_message_object
from a2a.types import TaskQueryParams, TaskState
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

URL = os.environ.get("STEPGRAPH_URL", "")
API_KEY = os.environ.get("STEPGRAPH_API_KEY", "")

if not URL or not API_KEY:
    raise RuntimeError(
        "STEPGRAPH_URL and STEPGRAPH_API_KEY must be set "
        "(run this suite through `go test ./test/conformance/ -run TestInteropConformance`)"
    )

HEADERS = {"X-Api-Key": API_KEY}


def run(coro):
    return asyncio.run(coro)


# --- MCP ---------------------------------------------------------------------


def test_mcp_lists_assistants_as_tools_and_calls_echo():
    async def main():
        async with streamablehttp_client(URL + "/mcp", headers=HEADERS) as (read, write, _):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.serverInfo.name == "LangGraph"
                assert init.capabilities.tools is not None

                tools = {t.name: t for t in (await session.list_tools()).tools}
                # Every built-in graph's system assistant is a tool.
                assert {"echo", "counter", "fail"} <= set(tools), tools.keys()
                echo = tools["echo"]
                assert echo.inputSchema["type"] == "object"
                assert "messages" in echo.inputSchema["properties"]
                assert echo.description

                result = await session.call_tool(
                    "echo", {"messages": [{"role": "user", "content": "hi from mcp"}]}
                )
                assert not result.isError
                out = json.loads(result.content[0].text)
                assert out["messages"][-1]["content"] == "echo: hi from mcp"

                counted = await session.call_tool("counter", {"steps": 3})
                assert json.loads(counted.content[0].text)["count"] == 3

                failed = await session.call_tool("fail", {})
                assert failed.isError
                assert "boom" in failed.content[0].text

    run(main())


def test_mcp_unknown_tool_is_an_error():
    async def main():
        async with streamablehttp_client(URL + "/mcp", headers=HEADERS) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                try:
                    result = await session.call_tool("no_such_assistant", {})
                except Exception as e:  # the SDK raises McpError for JSON-RPC errors
                    assert "Unknown tool" in str(e)
                else:
                    raise AssertionError(f"unknown tool answered {result}")

    run(main())


# --- A2A ---------------------------------------------------------------------


async def echo_agent(http):
    """The echo assistant's card, read the way an A2A client discovers it."""
    r = await http.get(URL + "/assistants/echo")
    r.raise_for_status()
    assistant_id = r.json()["assistant_id"]
    resolver = A2ACardResolver(http, base_url=f"{URL}/a2a/{assistant_id}")
    return assistant_id, await resolver.get_agent_card()


def test_a2a_agent_card():
    async def main():
        async with httpx.AsyncClient(headers=HEADERS) as http:
            assistant_id, card = await echo_agent(http)
            assert card.name == "echo"
            assert card.url == f"{URL}/a2a/{assistant_id}"
            assert card.capabilities.streaming is True
            assert card.skills[0].id == f"{assistant_id}-main"

    run(main())


def test_a2a_message_send_and_tasks_get():
    async def main():
        async with httpx.AsyncClient(headers=HEADERS, timeout=60) as http:
            _, card = await echo_agent(http)
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
            events = [e async for e in client.send_message(create_text_message_object(content="hello a2a"))]
            assert len(events) == 1
            task, update = events[0]
            assert update is None
            assert task.status.state == TaskState.completed
            assert task.artifacts[0].parts[0].root.text == "echo: hello a2a"
            assert task.id.startswith(task.context_id + ":")
            texts = [m.parts[0].root.text for m in task.history]
            assert texts == ["hello a2a", "echo: hello a2a"]

            # The context goes on: the second answer sees the first turn.
            msg = create_text_message_object(content="second")
            msg.context_id = task.context_id
            events = [e async for e in client.send_message(msg)]
            second, _ = events[0]
            assert second.context_id == task.context_id
            assert second.artifacts[0].parts[0].root.text == "echo: second"
            assert len(second.history) == 4

            got = await client.get_task(TaskQueryParams(id=task.id))
            assert got.id == task.id
            assert got.status.state == TaskState.completed

    run(main())


def test_a2a_message_stream():
    async def main():
        async with httpx.AsyncClient(headers=HEADERS, timeout=60) as http:
            _, card = await echo_agent(http)
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
            msg = create_text_message_object(content="streamed")
            msg.context_id = str(uuid.uuid4())
            events = [e async for e in client.send_message(msg)]
            # The task, working, the answer's artifact, the final status. The
            # client keeps one Task and applies each update to it, so the
            # updates tell the order.
            assert len(events) == 4, events
            updates = [update for _, update in events]
            assert updates[0] is None  # the Task itself, as submitted
            assert updates[1].kind == "status-update"
            assert updates[1].status.state == TaskState.working and updates[1].final is False
            assert updates[2].kind == "artifact-update"
            assert updates[2].artifact.parts[0].root.text == "echo: streamed"
            assert updates[3].kind == "status-update"
            assert updates[3].status.state == TaskState.completed and updates[3].final is True
            final, _ = events[-1]
            assert final.status.state == TaskState.completed
            assert final.context_id == msg.context_id
            assert final.artifacts[0].parts[0].root.text == "echo: streamed"

    run(main())
