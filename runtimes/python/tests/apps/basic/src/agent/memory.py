"""A graph using the store: it remembers what users said across threads."""

from typing_extensions import TypedDict

from langgraph.config import get_store
from langgraph.graph import START, StateGraph


class State(TypedDict, total=False):
    user: str
    fact: str
    known: list[str]


def remember(state: State):
    store = get_store()
    ns = ("memories", state["user"])
    if state.get("fact"):
        store.put(ns, f"fact-{len(store.search(ns))}", {"text": state["fact"]})
    return {"known": sorted(item.value["text"] for item in store.search(ns))}


builder = StateGraph(State)
builder.add_node("remember", remember)
builder.add_edge(START, "remember")
graph = builder.compile()
