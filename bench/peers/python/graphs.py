"""stepgraph's built-in graphs echo, counter and approval, for `langgraph dev` and Aegra.

Same channels, reducers, nodes and outputs as internal/graph/builtin.go, so the
load generator (bench/cmd/loadgen) checks every server's answers the same way.
"""

import json
import operator
from typing import Annotated, Any, Optional

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


def _text(v: Any) -> str:
    """A state value in a sentence: strings as they are, anything else as JSON."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"))


# --- echo: append reducer (operator.add), not add_messages: no ids added -----
class EchoState(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def _echo(state: EchoState) -> dict:
    msgs = state.get("messages") or []
    content = ""
    if msgs and isinstance(msgs[-1], dict):
        content = _text(msgs[-1].get("content"))
    return {"messages": [{"role": "assistant", "content": "echo: " + content}]}


_b = StateGraph(EchoState)
_b.add_node("echo", _echo)
_b.add_edge(START, "echo")
_b.add_edge("echo", END)
echo = _b.compile()


# --- counter: count (add reducer, starts at 0), steps (last value) ----------
class CounterState(TypedDict, total=False):
    count: Annotated[int, operator.add]
    steps: Optional[int]


def _inc(state: CounterState) -> dict:
    return {"count": 1}


def _route(state: CounterState) -> str:
    steps = state.get("steps")
    if steps is None:
        steps = 10
    return "inc" if (state.get("count") or 0) < steps else END


_b = StateGraph(CounterState)
_b.add_node("inc", _inc)
_b.add_edge(START, "inc")
_b.add_conditional_edges("inc", _route, ["inc", END])
counter = _b.compile()


# --- approval: interrupt with a question; the resume value is the answer -----
class ApprovalState(TypedDict, total=False):
    request: Any
    answer: Any


def _ask(state: ApprovalState) -> dict:
    answer = interrupt({"question": "approve " + _text(state.get("request")) + "?"})
    return {"answer": answer}


_b = StateGraph(ApprovalState)
_b.add_node("ask", _ask)
_b.add_edge(START, "ask")
_b.add_edge("ask", END)
approval = _b.compile()
