"""JoinedTextTrimmer against a pure-Python reference: LlamaIndex ChatMemoryBuffer's loop, which
tokenizes the joined texts of each suffix it tries, in memci's encodings. Texts are drawn heavy in
whitespace, line breaks, digits and punctuation, where the joints between texts tokenize apart from
the texts alone."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memci import tokens
from memci.errors import InvalidOperationError
from memci.integrations.joined_text import JoinedTextTrimmer

ROLES = ("user", "assistant", "tool", "system")


@dataclass(frozen=True)
class Message:
    role: str
    text: str


def opens(message: Message) -> bool:
    return message.role not in {"assistant", "tool"}


def trimmer(encoding: str, low_water: float | None = None) -> JoinedTextTrimmer[Message]:
    return JoinedTextTrimmer(lambda m: m.text, opens, encoding=encoding, low_water=low_water)


def joined(messages: list[Message], encoding: str) -> int:
    return tokens.count(" ".join(m.text for m in messages), encoding) if messages else 0


def reference(history: list[Message], budget: int, encoding: str) -> list[Message]:
    """ChatMemoryBuffer.get's loop, the suffix re-tokenized at each step."""
    count = len(history)
    tokens_now = joined(history, encoding)
    while tokens_now > budget and count > 1:
        count -= 1
        while count > 1 and not opens(history[-count]):
            count -= 1
        tokens_now = joined(history[-count:], encoding)
    if tokens_now > budget or count <= 0:
        return history[-1:]
    return history[-count:]


PARTS = st.sampled_from(["hello", "world", "Rhubarb", " ", "  ", "\n", "\n\n", " \n ", "\t", "!", "?!", "123", "4"])
TEXTS = st.lists(PARTS | st.text(max_size=4), max_size=5).map("".join)
MESSAGES = st.lists(st.builds(Message, st.sampled_from(ROLES), TEXTS), min_size=1, max_size=12)
ENCODINGS = st.sampled_from(["cl100k_base", "o200k_base"])


@settings(max_examples=300, deadline=None)
@given(MESSAGES, st.integers(0, 40), ENCODINGS)
def test_each_call_keeps_what_the_reference_keeps(messages: list[Message], budget: int, encoding: str) -> None:
    """Grown a message at a time, the counts taken once each, at every length."""
    trim = trimmer(encoding)
    for n in range(1, len(messages) + 1):
        assert trim.trim(messages[:n], budget) == reference(messages[:n], budget, encoding)


@settings(max_examples=100, deadline=None)
@given(MESSAGES, MESSAGES, st.integers(0, 40))
def test_a_history_replaced_or_shortened_is_counted_again(
    first: list[Message], second: list[Message], budget: int
) -> None:
    # Recognised by identity: equal messages in a replaced history would read as the same one (a
    # message changed in the middle is not seen, by design).
    trim = JoinedTextTrimmer(lambda m: m.text, opens, same=lambda a, b: a is b, encoding="cl100k_base")
    trim.trim(first, budget)
    for history in (second, first[:1], [*first, *second]):
        assert trim.trim(history, budget) == reference(history, budget, "cl100k_base")


def test_each_text_is_read_once() -> None:
    read: list[str] = []

    def text(message: Message) -> str:
        read.append(message.text)
        return message.text

    trim = JoinedTextTrimmer(text, opens, encoding="cl100k_base")
    history = [Message("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(200)]
    for n in range(1, len(history) + 1):
        trim.trim(history[:n], 30)
    assert sorted(read) == sorted(m.text for m in history)


def test_nothing_fits_keeps_the_last_message_and_an_empty_history_keeps_nothing() -> None:
    trim = trimmer("cl100k_base")
    history = [Message("user", "a long question " * 10), Message("assistant", "a long answer " * 10)]
    assert trim.trim(history, 5) == history[-1:]
    assert trim.trim([], 5) == []


@settings(max_examples=150, deadline=None)
@given(MESSAGES, st.integers(1, 40))
def test_with_low_water_the_kept_messages_grow_until_a_cut(messages: list[Message], budget: int) -> None:
    """Hysteresis: while the messages kept at the last call, plus the new ones, fit, they are kept;
    else the cut keeps the reference's answer within low_water of the budget if it fits there, else
    the reference's answer within the budget."""
    trim = trimmer("cl100k_base", low_water=0.5)
    opened_at: int | None = None
    for n in range(1, len(messages) + 1):
        history = messages[:n]
        kept = trim.trim(history, budget)
        if opened_at is not None and joined(history[opened_at:], "cl100k_base") <= budget:
            assert kept == history[opened_at:]
        else:
            low = reference(history, budget // 2, "cl100k_base")
            fits_low = joined(low, "cl100k_base") <= budget // 2
            assert kept == (low if fits_low else reference(history, budget, "cl100k_base"))
        opened_at = n - len(kept) if joined(kept, "cl100k_base") <= budget else None


def test_a_bad_low_water_or_an_inexact_encoding_is_refused() -> None:
    with pytest.raises(InvalidOperationError, match="low_water"):
        trimmer("cl100k_base", low_water=1.5)
    with pytest.raises(InvalidOperationError, match=r"JoinedTextTrimmer: .*exact encoding"):
        trimmer("approximate")
    with pytest.raises(InvalidOperationError, match="p50k"):
        trimmer("p50k_base")
    assert trimmer("gpt-4o").encoding == "gpt-4o"  # a model name names its encoding


def test_threads_sharing_one_trimmer_each_get_the_reference_answer() -> None:
    """Four threads trim prefixes of one history through one trimmer, in orders that grow and
    shrink it under each other: each answer is the reference's."""
    history = [Message("user" if i % 3 == 0 else "assistant", f"message {i} " * (i % 4 + 1)) for i in range(60)]
    expected = {n: reference(history[:n], 40, "cl100k_base") for n in range(1, len(history) + 1)}
    trim = trimmer("cl100k_base")
    wrong: list[int] = []

    def work(order: list[int]) -> None:
        wrong.extend(n for n in order if trim.trim(history[:n], 40) != expected[n])

    orders = [list(expected), list(reversed(expected)), list(expected)[::2], list(expected)[1::3]]
    threads = [threading.Thread(target=work, args=(order,)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
