"""What the context system counts its window with: :class:`SystemTokens`.

With an encoding (the default), the window's counts are held by the core's page window, per
message, counted once: what a window costs with any number of its oldest pages archived is a sum
over held counts (:meth:`SystemTokens.without_oldest`), so planning under ``max_context_tokens``
tokenizes nothing already counted. A caller's ``counter`` is a Python callable memci cannot
memoise (its answer for a message may change): those windows are counted afresh each time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memci import _core, tokens
from memci.tokens import Counter

__all__ = ["Sent", "SystemTokens"]


class SystemTokens:
    """Counts with ``memci.tokens`` in the system's encoding, or with the caller's message
    ``counter`` (as everywhere in memci: a message dict in, its tokens out). The contents page is
    counted as the system message it is sent as."""

    __slots__ = ("counter", "encoding", "overhead", "thinking")

    def __init__(self, encoding: str, counter: Counter | None, thinking: str = tokens.DEFAULT_THINKING) -> None:
        self.encoding, self.counter = tokens.resolve("ContextSystem", encoding, counter)
        self.thinking = tokens.thinking_rule("ContextSystem", thinking)
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
        return tokens.count_messages(messages, self.encoding, counter=self.counter, thinking=self.thinking)

    def contents(self, text: str | None) -> int:
        """What the contents page adds to a window (0 while it is not sent): the system message
        it is sent as. It opens no turn and holds no thinking, so it costs the same wherever it
        stands in the list."""
        return 0 if text is None else self.text_message(text)

    def without_oldest(self, window: _core.PageWindow) -> Sequence[int]:
        """Item k: the tokens of ``window`` (its system chapter and active pages, no contents
        page) with its k oldest active pages left out, as :meth:`messages` counts them. With an
        encoding, all of them at once from the counts the window holds (O(pages) once each message
        is counted); with a ``counter``, each item recounted when it is read (O(window))."""
        if self.counter is None:
            return window.tokens_without_oldest(self.encoding, self.thinking)
        return _Recounted(self, window)


class _Recounted(Sequence[int]):
    """:meth:`SystemTokens.without_oldest` by a caller's counter: item k counts the window's
    messages without its k oldest pages, when it is read."""

    def __init__(self, tokens: SystemTokens, window: _core.PageWindow) -> None:
        self._tokens = tokens
        self._messages = window.messages()
        self._system_len = window.system_len
        #: Where each active page starts in ``_messages``, and the window's end.
        self._starts = [self._system_len]
        for index in window.page_indices():
            self._starts.append(self._starts[-1] + len(window.page(index)))

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, k: Any) -> Any:  # Sequence's overloads: an int (a slice is not used)
        kept = self._messages[: self._system_len] + self._messages[self._starts[k] :]
        return self._tokens.messages(kept)


class Sent(Sequence[int]):
    """Item k: ``held[k]`` (the window's tokens without its k oldest pages) less ``saved[k]`` (what
    the context edits save on those pages): the window as it is sent. Lazy, so a caller's counter
    still counts only the items read."""

    def __init__(self, held: Sequence[int], saved: Sequence[int]) -> None:
        self._held, self._saved = held, saved

    def __len__(self) -> int:
        return len(self._held)

    def __getitem__(self, k: Any) -> Any:  # Sequence's overloads: an int (a slice is not used)
        return self._held[k] - self._saved[k]
