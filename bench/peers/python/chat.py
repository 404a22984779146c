"""The chat graph (the stream-chat workload) for `langgraph dev`: one chat model call.

Apart from graphs.py so that the servers serving only echo, counter and
approval (Aegra) need no model client (langchain-openai).
"""

import os
from typing import Annotated

from typing_extensions import TypedDict

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


# --- chat: one chat model call (the stream-chat workload) --------------------
# stepgraph's side is a graph document with a chat_model node
# (bench/cmd/loadgen/chatgraph.go); both call loadgen's local OpenAI-compatible
# endpoint, whose URL loadgen passes in BENCH_MODEL_URL (and its dummy key in
# OPENAI_API_KEY). With stream_mode messages-tuple, LangGraph's messages
# handler makes ChatOpenAI stream, and each token chunk is an event.

_model = ChatOpenAI(
    model="bench-model",
    base_url=os.environ.get("BENCH_MODEL_URL", "http://127.0.0.1:9/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "unset"),
    max_retries=0,
)


class ChatState(TypedDict, total=False):
    messages: Annotated[list, add_messages]


def _call_model(state: ChatState) -> dict:
    return {"messages": [_model.invoke(state["messages"])]}


_b = StateGraph(ChatState)
_b.add_node("model", _call_model)
_b.add_edge(START, "model")
_b.add_edge("model", END)
chat = _b.compile()
