"""A chat model for tests: scripted answers, streamed token by token, with tool calls.

langchain-core's GenericFakeChatModel drops tool calls when streaming, so
this one streams the content word by word and the tool calls as chunks.
"""

import re
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult


class ScriptedChatModel(BaseChatModel):
    """Answers from the script: the k-th call gets the k-th answer, where k
    counts the AI messages already in the conversation (so it is stateless)."""

    script: list[dict]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _answer(self, messages: list[BaseMessage]) -> AIMessage:
        k = sum(1 for m in messages if m.type == "ai")
        step = self.script[min(k, len(self.script) - 1)]
        return AIMessage(content=step.get("content", ""), tool_calls=step.get("tool_calls", []))

    def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        msg = self._answer(messages)
        for token in [t for t in re.split(r"(\s)", msg.content) if t]:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        for i, call in enumerate(msg.tool_calls):
            import json

            chunk = ChatGenerationChunk(message=AIMessageChunk(
                content="",
                tool_call_chunks=[{"name": call["name"], "args": json.dumps(call["args"]), "id": call["id"], "index": i}],
            ))
            if run_manager:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
