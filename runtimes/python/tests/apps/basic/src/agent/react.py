"""A tool-calling ReAct agent, as LangGraph's docs write one."""

from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from agent.fakemodel import ScriptedChatModel


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    get_stream_writer()({"tool": "get_weather", "city": city})
    return f"It is sunny in {city}."


model = ScriptedChatModel(script=[
    {"tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}]},
    {"content": "The weather in Paris is sunny today."},
]).bind_tools([get_weather])


def call_model(state: MessagesState):
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("agent", call_model)
builder.add_node("tools", ToolNode([get_weather]))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", tools_condition)
builder.add_edge("tools", "agent")
graph = builder.compile()
