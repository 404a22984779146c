"""Two steps; the second waits for a file, so a test can stop the server
while it runs (no sleeps as synchronisation: the test waits for "entered")."""

import os
import time
from typing import Annotated
import operator

from typing_extensions import TypedDict

from langgraph.graph import START, StateGraph


class State(TypedDict, total=False):
    dir: str
    steps: Annotated[list[str], operator.add]


def first(state: State):
    with open(os.path.join(state["dir"], "first.log"), "a") as f:
        f.write("first\n")
    return {"steps": ["first"]}


def second(state: State):
    open(os.path.join(state["dir"], "entered"), "a").close()
    deadline = time.monotonic() + 120  # a safety net, not a timing
    while not os.path.exists(os.path.join(state["dir"], "gate")):
        if time.monotonic() > deadline:
            raise TimeoutError("the gate file never appeared")
        time.sleep(0.02)
    return {"steps": ["second"]}


builder = StateGraph(State)
builder.add_node("first", first)
builder.add_node("second", second)
builder.add_edge(START, "first")
builder.add_edge("first", "second")
graph = builder.compile()
