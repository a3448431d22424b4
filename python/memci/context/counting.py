"""What the context system counts its window with: :class:`SystemTokens`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memci import tokens
from memci.tokens import Counter

__all__ = ["SystemTokens"]


class SystemTokens:
    """Counts with ``memci.tokens`` in the system's encoding, or with the caller's message
    ``counter`` (as everywhere in memci: a message dict in, its tokens out). The contents page is
    counted as the system message it is sent as."""

    __slots__ = ("counter", "encoding", "overhead")

    def __init__(self, encoding: str, counter: Counter | None) -> None:
        self.encoding, self.counter = tokens.resolve("ContextSystem", encoding, counter)
        #: What a system message costs beyond its text: subtracted from one entry's lines when
        #: they are counted alone.
        self.overhead = self.text_message("")

    def text_message(self, text: str) -> int:
        message = {"role": "system", "content": text}
        if self.counter is not None:
            return tokens.counted("ContextSystem: counter", self.counter, message)
        return tokens.count_message(message, self.encoding)

    def lines(self, text: str) -> int:
        """The tokens ``text`` adds to the contents page."""
        return max(0, self.text_message(text) - self.overhead)

    def messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return tokens.count_messages(messages, self.encoding, counter=self.counter)
