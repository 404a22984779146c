"""Human in the loop: a node asks with interrupt() and goes on with the answer."""

from typing_extensions import TypedDict

from langgraph.graph import START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    topic: str
    approved: bool
    log: list[str]


def draft(state: State):
    return {"log": [f"drafted {state['topic']}"]}


def review(state: State):
    answer = interrupt({"question": f"Publish {state['topic']}?"})
    return {"approved": answer == "yes", "log": state.get("log", []) + [f"review: {answer}"]}


builder = StateGraph(State)
builder.add_node("draft", draft)
builder.add_node("review", review)
builder.add_edge(START, "draft")
builder.add_edge("draft", "review")
graph = builder.compile()
