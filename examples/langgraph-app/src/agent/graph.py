"""A chat agent that asks before it answers: the smallest LangGraph app that
shows token streaming, a custom event and a human in the loop.

Its chat model is langchain-core's fake one, so it runs without an API key:
swap in a real one (langchain-openai's ChatOpenAI, say) and nothing else
changes.
"""

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt

model = GenericFakeChatModel(messages=iter([AIMessage(content=f"Answer number {i}: hello from stepgraph!") for i in range(1, 10_000)]))


def confirm(state: MessagesState):
    get_stream_writer()({"step": "confirm"})
    answer = interrupt({"question": f"Answer {state['messages'][-1].content!r}?"})
    return {"messages": [AIMessage(content="Not answering, as you asked.")]} if answer == "no" else {}


def answer(state: MessagesState):
    if state["messages"][-1].type == "ai":
        return {}
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("confirm", confirm)
builder.add_node("answer", answer)
builder.add_edge(START, "confirm")
builder.add_edge("confirm", "answer")
graph = builder.compile()
