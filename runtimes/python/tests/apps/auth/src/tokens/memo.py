"""A graph using both of the platform's links: its store (get_store) and the
run's user's provider token (get_token). It notes `fact` under the user's
namespace, answers what it knows of the user, and, with `ask_token`, asks
for the user's token (interrupting with the authorization URL until the
user consents). With `wait_for`, it first sends a custom event and waits
until the store has ("signals",) `wait_for`: a test that sees the event
before it writes the signal knows the event arrived while the call ran. On
Lambda the links reach the stage's API with the call's signed token."""

import time

from typing_extensions import TypedDict

from langgraph.config import get_store, get_stream_writer
from langgraph.graph import START, StateGraph
from stepgraph_runtime.auth import get_token


class State(TypedDict, total=False):
    user: str
    fact: str
    ask_token: bool
    wait_for: str
    known: list[str]
    has_token: bool


def note(state: State):
    store = get_store()
    if state.get("wait_for"):
        get_stream_writer()({"waiting": state["wait_for"]})
        deadline = time.monotonic() + 300  # a safety net: the test signals
        while store.get(("signals",), state["wait_for"]) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no signal {state['wait_for']!r}")
            time.sleep(0.1)
    ns = ("memories", state["user"])
    if state.get("fact"):
        store.put(ns, "note", {"text": state["fact"]})
    known = sorted(item.value["text"] for item in store.search(ns))
    if state.get("ask_token"):
        token = get_token("gh", ["repo"])
        return {"known": known, "has_token": bool(token)}  # never the token itself
    return {"known": known}


graph = StateGraph(State).add_node("note", note).add_edge(START, "note").compile()
