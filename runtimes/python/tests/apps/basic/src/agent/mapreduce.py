"""Map-reduce with Send: one task per subject, reduced by a list reducer."""

import operator
from typing import Annotated

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send


class State(TypedDict, total=False):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]
    best: str


def fan_out(state: State):
    return [Send("joke", {"subject": s}) for s in state["subjects"]]


def joke(arg: dict):
    return {"jokes": [f"a joke about {arg['subject']}"]}


def pick(state: State):
    return {"best": sorted(state["jokes"])[0]}


builder = StateGraph(State)
builder.add_node("joke", joke)
builder.add_node("pick", pick)
builder.add_conditional_edges(START, fan_out, ["joke"])
builder.add_edge("joke", "pick")
builder.add_edge("pick", END)
graph = builder.compile()
