"""A parent graph with a subgraph node; the subgraph asks a question."""

from typing_extensions import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    text: str


def child_step(state: State):
    get_stream_writer()({"in": "child"})
    return {"text": state["text"] + " child"}


def child_ask(state: State):
    answer = interrupt("continue?")
    return {"text": state["text"] + f" {answer}"}


child = StateGraph(State)
child.add_node("child_step", child_step)
child.add_node("child_ask", child_ask)
child.add_edge(START, "child_step")
child.add_edge("child_step", "child_ask")
child_graph = child.compile()


def before(state: State):
    return {"text": state["text"] + " parent"}


builder = StateGraph(State)
builder.add_node("before", before)
builder.add_node("sub", child_graph)
builder.add_edge(START, "before")
builder.add_edge("before", "sub")
graph = builder.compile()
