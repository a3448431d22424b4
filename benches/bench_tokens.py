"""Token counting and token budgets.

``count``: the token count of every text of the conversation (contents and tool-call arguments),
one call per text, ``o200k_base``.

- ``memci``: ``tokens.count(text)`` per text (Rust, ``bpe-openai`` ranks compiled in).
- ``tiktoken``: ``len(enc.encode_ordinary(text))`` per text (tiktoken's Rust core), its ranks
  loaded offline from the file memci rebuilds.

``count_batch``: the same texts in one call, on every core. ``memci``: ``tokens.count_batch``;
``tiktoken``: the per-text loop above; ``tiktoken-batch``: ``enc.encode_ordinary_batch`` (a thread
pool).

``trim_approx`` / ``trim_exact``: keep the newest messages within a budget of a fifth of the
history's tokens, the system prompt kept, starting on a user message (the state is restored between
rounds, untimed, by rolling back).

- ``memci``: ``trim_to_tokens(budget)`` with ``counter=tokens.approximate`` / the default
  ``o200k_base``: counts cached per stored message, so a round after the first counts nothing.
- ``memci-cold``: the same on a new array each round (setup, untimed), so every count the trim
  needs is computed in the round.
- ``langchain``: ``trim_messages(..., strategy="last", include_system=True, start_on="human")``
  with ``count_tokens_approximately`` / a per-message exact counter (tiktoken, the OpenAI
  cookbook's formula, as ``ChatOpenAI.get_num_tokens_from_messages`` counts): LangChain counts a
  prefix of the history per step of its binary search, re-tokenizing each time.

Targets (issue 4): counting at least as fast as tiktoken on one core, 2x with ``count_batch`` on 2
cores; ``trim_to_tokens`` at least 50x LangChain at 100k.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from typing import Any

import generator
import harness
import memci
import pytest
from memci import tokens

BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
ENCODING = "o200k_base"


@cache
def tiktoken_encoding() -> Any:
    """tiktoken's ``o200k_base``, loaded offline from the ranks memci ships."""
    tiktoken = pytest.importorskip("tiktoken")
    cache_dir = str(harness.temp_dir("memci-tiktoken-"))
    data = tokens.ranks_file(ENCODING).encode()
    with open(os.path.join(cache_dir, hashlib.sha1(BLOB.format(ENCODING).encode()).hexdigest()), "wb") as f:
        f.write(data)
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = cache_dir
    try:  # tiktoken keeps the encoding once loaded: the rest of the process sees the environment as it was
        return tiktoken.get_encoding(ENCODING)
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


@cache
def texts(size: str) -> tuple[str, ...]:
    messages = generator.conversation(generator.SIZES[size])
    out = [m["content"] for m in messages if isinstance(m["content"], str)]
    out += [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or ()]
    return tuple(out)


def _importorskip(peer: str) -> None:
    if peer.startswith("tiktoken"):
        tiktoken_encoding()
    harness.importorskip_peer(peer)


# ---- counting -------------------------------------------------------------------------------------


def _memci_count(items: tuple[str, ...]) -> int:
    count = tokens.count
    return sum(count(t, ENCODING) for t in items)


def _tiktoken_count(items: tuple[str, ...]) -> int:
    encode = tiktoken_encoding().encode_ordinary
    return sum(len(encode(t)) for t in items)


def _memci_batch(items: tuple[str, ...]) -> int:
    return sum(tokens.count_batch(items, ENCODING))


def _tiktoken_batch(items: tuple[str, ...]) -> int:
    return sum(map(len, tiktoken_encoding().encode_ordinary_batch(list(items))))


COUNTERS = {
    "count": {"memci": _memci_count, "tiktoken": _tiktoken_count},
    "count_batch": {"memci": _memci_batch, "tiktoken": _tiktoken_count, "tiktoken-batch": _tiktoken_batch},
}


@pytest.mark.parametrize(("peer", "size"), harness.cases(COUNTERS["count"]))
def test_count(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    _run_count(benchmark, request, "count", peer, size)


@pytest.mark.parametrize(("peer", "size"), harness.cases(COUNTERS["count_batch"]))
def test_count_batch(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    _run_count(benchmark, request, "count_batch", peer, size)


def _run_count(benchmark: Any, request: pytest.FixtureRequest, workload: str, peer: str, size: str) -> None:
    _importorskip(peer)
    items = texts(size)
    harness.label(benchmark, workload, peer, size, texts=len(items), chars=sum(map(len, items)))
    got = harness.measure(benchmark, COUNTERS[workload][peer], lambda: ((items,), {}), slow=harness.is_slow(request))
    # Checked against memci's other entry point, so that neither is checked against itself.
    if workload == "count_batch":
        assert got == sum(tokens.count(text, ENCODING) for text in items)
    else:
        assert got == sum(tokens.count_batch(items, ENCODING))


# ---- trimming to a budget -----------------------------------------------------------------------


def _lc_exact_counter() -> Any:
    from langchain_core.messages import convert_to_openai_messages

    encode = tiktoken_encoding().encode_ordinary

    def count(message: Any) -> int:
        d = convert_to_openai_messages(message)
        total = 3 + len(encode(d["role"]))
        content = d.get("content")
        if isinstance(content, str):
            total += len(encode(content))
        for c in d.get("tool_calls") or ():
            total += len(encode(c["function"]["name"])) + len(encode(c["function"]["arguments"])) + 1
        return total

    # A list counter: LangChain recognises a per-message one only by a BaseMessage annotation object.
    return lambda messages: sum(count(m) for m in messages)


def _budget(size: str, exact: bool) -> int:
    arr = harness.memci_history(size)
    return (arr.token_count(ENCODING) if exact else arr.token_count(counter=tokens.approximate)) // 5


def _memci_trim(arr: memci.MessageArray, budget: int, exact: bool) -> memci.MessageArray:
    if exact:
        arr.trim_to_tokens(budget, encoding=ENCODING)
    else:
        arr.trim_to_tokens(budget, counter=tokens.approximate)
    return arr


def _langchain_trim(messages: list[Any], budget: int, counter: Any) -> list[Any]:
    from langchain_core.messages import trim_messages

    return trim_messages(
        messages, max_tokens=budget, token_counter=counter, strategy="last", include_system=True, start_on="human"
    )


TRIM_PEERS = ("memci", "memci-cold", "langchain")


@pytest.mark.parametrize(("peer", "size"), harness.cases(TRIM_PEERS, slow=("langchain-100k",)))
def test_trim_approx(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    _run_trim(benchmark, request, "trim_approx", peer, size, exact=False)


@pytest.mark.parametrize(
    ("peer", "size"), harness.cases(TRIM_PEERS, slow=("langchain-10k", "langchain-100k", "memci-cold-100k"))
)
def test_trim_exact(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    _run_trim(benchmark, request, "trim_exact", peer, size, exact=True)


def _run_trim(
    benchmark: Any, request: pytest.FixtureRequest, workload: str, peer: str, size: str, *, exact: bool
) -> None:
    _importorskip(peer)
    budget = _budget(size, exact)
    harness.label(benchmark, workload, peer, size, max_tokens=budget)
    slow = harness.is_slow(request)
    messages = generator.conversation(generator.SIZES[size])
    if peer == "langchain":
        from langchain_core.messages.utils import count_tokens_approximately

        lc = list(harness.langchain_messages(size))
        counter = _lc_exact_counter() if exact else count_tokens_approximately
        got = harness.measure(benchmark, _langchain_trim, lambda: ((lc, budget, counter), {}), slow=slow)
        assert 0 < len(got) < len(lc)
        assert got[0].type == "system"
        return
    if peer == "memci-cold":
        arr = harness.measure(
            benchmark, _memci_trim, lambda: ((memci.MessageArray(messages), budget, exact), {}), slow=slow
        )
    else:
        arr = memci.MessageArray(messages)

        def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
            arr.rollback(0)
            return (arr, budget, exact), {}

        harness.measure(benchmark, _memci_trim, setup, slow=slow)
    kept = arr.messages()
    assert 0 < len(kept) < len(messages)
    assert kept[0]["role"] == "system"
    assert kept[1]["role"] == "user"
    used = arr.token_count(ENCODING) if exact else arr.token_count(counter=tokens.approximate)
    assert used <= budget
