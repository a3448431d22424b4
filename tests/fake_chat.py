"""A LangChain fake chat model for the integration tests: answers from a script, records what each
call was sent, and binds tools as agents ask (it ignores them: the script decides)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage


class RecordingModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering from a script, recording what each call was sent."""

    sent: list[list[BaseMessage]]

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def model(script: list[AIMessage]) -> RecordingModel:
    """A recording model answering ``script`` in order."""
    return RecordingModel(messages=iter(script), sent=[])
