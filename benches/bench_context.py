"""The paged context system (docs/design.md): rounds on a long conversation, and ``build_messages``.

No peer pages a conversation by user interaction with a contents page, recall counts and archive
rules (Letta evicts 30% of its messages FIFO and summarises with a model; LlamaIndex trims a token
buffer), so the memci figures stand mostly on their own. Two peers are measured for scale, and
both do less than memci:

- ``llamaindex``: what a LlamaIndex user keeps a long chat bounded with: a ``ChatMemoryBuffer``
  holding every message, whose ``get()`` trims to a token limit (the size of memci's window) each
  round. Nothing is summarised, stored or searchable.
- ``python-window``: a hand-written sliding window over a list of dicts: copy the messages in,
  send copies of the last 5 interactions. No archive at all: the floor any paging system sits on.

Workloads (the size label counts *archived pages*: 1k or 10k, about 4.6 messages each):

- ``context_round``: ``ROUNDS`` rounds of agent conversation, each: the user message (which opens
  a page and archives the oldest: summary, storage write, O(1) unlink, contents entry, search
  index), the assistant's tool calls and their results, the answer, ``end_round`` (the m, p and
  LRU rules) and ``build_messages``. ``memci`` stores pages in ``MemoryStorage``, ``memci-sqlite``
  in ``SqliteStorage`` (a file in a temporary directory, one transaction per page). Each timed call
  is one round, so rounds per second is ``1 / median``; the system keeps growing as calls run.
- ``context_build``: one ``build_messages()`` with n=5 active pages and a full contents page (just
  under the LRU trigger of the default 2000-token cap), sanitizer included. ``python-window``
  renders the same contents text, copies the same five pages and runs the pure-Python sanitizer
  (``benches/pure_sanitize.py``) over them.

- ``attp_parse``: reading the TOML of one ATTP answer, the core's reader
  (``memci._core.read_attp_call``, what ``handle_tool_call`` uses) against ``tomllib.loads``
  (what it replaced), at four shapes (the size label): ``typical``, a 150-character answer
  recalling two pages; ``code-20k``, an answer whose code is 20,000 characters of calls (the code's
  cap); ``dotted-20k`` and ``dotted-98k``, an answer under the 100,000-character cap holding one
  dotted key of 10,000 and 49,000 parts (tomllib's quadratic case; the core refuses the key, at
  80 levels, having read it once). tomllib's 98 KB case takes over a minute a call: it runs only
  with ``MEMCI_BENCH_SLOW=1``.

Tokens are counted exactly (``memci.tokens``, o200k_base), as a ContextSystem does by default.
"""

from __future__ import annotations

import tomllib
from functools import cache
from typing import Any

import generator
import harness
import memci
import pure_sanitize
import pytest
from pure_python import copy_json

#: Rounds per timed call: one, so a peer that takes many seconds a round can be measured too.
ROUNDS = 1
ACTIVE_PAGES = 5
#: Archived pages before the timed rounds, by size label.
PAGES = {"1k": 1_000, "10k": 10_000}
#: Messages enough for the archived pages, the timed rounds and every calibration run.
MESSAGES = 60_000

ROUND_PEERS = ("memci", "memci-sqlite", "llamaindex", "python-window")
ROUND_CASES = harness.cases(
    ROUND_PEERS,
    sizes=tuple(PAGES),
    # Building 10k archived pages takes seconds; LlamaIndex's trim is quadratic in the history
    # (about 45 s a round at 1k pages, so more than an hour at 10k).
    slow=("memci-10k", "memci-sqlite-10k", "python-window-10k", "llamaindex-1k"),
    very_slow=("llamaindex-10k",),
)
BUILD_PEERS = ("memci", "python-window")
BUILD_CASES = harness.cases(BUILD_PEERS, sizes=("1k",))

Message = dict[str, Any]


def interactions() -> tuple[tuple[Message, ...], ...]:
    """The generated conversation cut into user interactions (the system prompt left out)."""
    return generator.interactions(MESSAGES)


def _storage(peer: str) -> memci.Storage:
    if peer == "memci-sqlite":
        return memci.SqliteStorage(str(harness.temp_dir("memci-bench-") / "context.db"))
    return memci.MemoryStorage()


class _System:
    """A context system that has archived ``pages`` pages, and where the conversation goes next."""

    def __init__(self, peer: str, pages: int) -> None:
        self.ctx = memci.ContextSystem(
            generator.conversation(1)[0]["content"], active_pages=ACTIVE_PAGES, storage=_storage(peer)
        )
        self.next = 0
        self.rounds(pages + ACTIVE_PAGES)

    def rounds(self, count: int) -> list[Message]:
        ctx, todo = self.ctx, interactions()
        sent: list[Message] = []
        for _ in range(count):
            for m in todo[self.next]:
                ctx.add(m)
            self.next += 1
            ctx.end_round()
            sent = ctx.build_messages()
            ctx.save()  # a round an agent can resume from: archived pages are written with the state
        return sent


@cache
def _system(peer: str, size: str) -> _System:
    return _System(peer, PAGES[size])


class _Window:
    """The ``python-window`` peer: every message copied in, the last five interactions copied out."""

    def __init__(self, pages: int) -> None:
        self.system = {"role": "system", "content": generator.conversation(1)[0]["content"]}
        self.messages: list[Message] = []
        self.starts: list[int] = []
        self.next = 0
        self.rounds(pages + ACTIVE_PAGES)

    def rounds(self, count: int) -> list[Message]:
        todo = interactions()
        sent: list[Message] = []
        for _ in range(count):
            self.starts.append(len(self.messages))
            self.messages.extend(copy_json(m) for m in todo[self.next])
            self.next += 1
            first = self.starts[-ACTIVE_PAGES] if len(self.starts) >= ACTIVE_PAGES else 0
            sent = [copy_json(self.system), *(copy_json(m) for m in self.messages[first:])]
        return sent


@cache
def _window(size: str) -> _Window:
    return _Window(PAGES[size])


class _Llama:
    """The ``llamaindex`` peer: a ``ChatMemoryBuffer`` holding everything, trimmed by ``get()``."""

    def __init__(self, pages: int, token_limit: int) -> None:
        from bench_build import llamaindex_messages
        from llama_index.core.memory import ChatMemoryBuffer

        self.convert = llamaindex_messages
        history = [m for i in interactions()[: pages + ACTIVE_PAGES] for m in i]
        self.buffer = ChatMemoryBuffer.from_defaults(chat_history=self.convert(history), token_limit=token_limit)
        self.next = pages + ACTIVE_PAGES

    def rounds(self, count: int) -> list[Any]:
        sent: list[Any] = []
        for _ in range(count):
            for m in self.convert(list(interactions()[self.next])):
                self.buffer.put(m)
            self.next += 1
            sent = self.buffer.get()
        return sent


@pytest.mark.parametrize(("peer", "size"), ROUND_CASES)
def test_context_round(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    harness.importorskip_peer(peer)
    # Only LlamaIndex is slow a round; the other 10k cases are marked slow for their setup (building
    # 10k archived pages), which keeps them out of the untimed pass but not out of calibration.
    slow = harness.is_slow(request) and peer == "llamaindex"
    if peer == "python-window":
        window = _window(size)
        harness.label(benchmark, "context_round", peer, size, rounds=ROUNDS)
        sent = harness.measure(benchmark, window.rounds, lambda: ((ROUNDS,), {}), slow=slow)
        assert sent[1:] == [m for i in interactions()[window.next - ACTIVE_PAGES : window.next] for m in i]
        return
    if peer == "llamaindex":
        reference = _system("memci", "1k")
        llama = _Llama(PAGES[size], reference.ctx.token_count())
        harness.label(benchmark, "context_round", peer, size, rounds=ROUNDS)
        sent = harness.measure(benchmark, llama.rounds, lambda: ((ROUNDS,), {}), slow=slow)
        assert sent, "the buffer keeps the latest messages"
        assert sent[-1].content == interactions()[llama.next - 1][-1]["content"]
        return
    system = _system(peer, size)
    before = system.next
    harness.label(benchmark, "context_round", peer, size, rounds=ROUNDS)
    sent = harness.measure(benchmark, system.rounds, lambda: ((ROUNDS,), {}), slow=slow)
    ctx = system.ctx
    archived = system.next - ACTIVE_PAGES
    assert [p.index for p in ctx.pages] == list(range(archived + 1, system.next + 1))
    assert len(ctx.storage.page_indices()) == archived >= PAGES[size] + ROUNDS - 1
    assert system.next >= before + ROUNDS
    assert sent[0]["role"] == "system"
    assert sent[-1] == interactions()[system.next - 1][-1]
    assert ctx.contents, "recently archived pages are on the contents page"


def _full_contents() -> memci.ContextSystem:
    """n=5 pages active and the contents page just under the LRU trigger (0.9 x 2000 tokens)."""
    policy = memci.ArchivePolicy(unrecalled_rounds=10**6, unchanged_rounds=10**6)
    ctx = memci.ContextSystem(
        "You are a careful coding agent.", active_pages=ACTIVE_PAGES, storage=_storage("memci"), policy=policy
    )
    todo = interactions()
    at = 0
    while True:
        for m in todo[at]:
            ctx.add(m)
        at += 1
        if ctx.contents_tokens() >= 0.8 * policy.contents_max_tokens:
            break
    assert ctx.end_round().dropped == ()
    return ctx


@pytest.mark.parametrize(("peer", "size"), BUILD_CASES)
def test_context_build(benchmark: Any, peer: str, size: str) -> None:
    ctx = _full_contents()
    harness.label(benchmark, "context_build", peer, size, contents_tokens=ctx.contents_tokens())
    expected = ctx.build_messages()
    pages = [m for p in ctx.pages for m in p.messages()]
    if peer == "memci":
        sent = harness.measure(benchmark, ctx.build_messages)
    else:
        system = expected[:2]
        contents = ctx.contents

        def by_hand() -> list[Message]:
            text = "\n".join(
                [
                    "Contents of archived pages.",
                    *(
                        "\n".join([f"[page {e.index}] {e.summary}", *(f"  - {s}" for s in e.entry_summaries)])
                        for e in contents
                    ),
                ]
            )
            window = [*map(copy_json, system), {"role": "system", "content": text}, *map(copy_json, pages)]
            return pure_sanitize.sanitize_messages(window)[0]

        sent = harness.measure(benchmark, by_hand)
    assert len(sent) == len(expected)
    # memci against its active pages read another way; the hand-built window against memci.
    assert sent[3:] == (pages if peer == "memci" else expected[3:])
    assert len(ctx.pages) == ACTIVE_PAGES


def _attp_answer(code: str, tail: str = "") -> str:
    return f"[tool_call]\nstatus = \"success\"\ntarget = \"read pages\"\ncode = '''\n{code}\n'''\n{tail}"


ATTP_ANSWERS = {
    "typical": _attp_answer("a = recall_page(3)\n__result__ = [a, list_pages(5)]"),
    "code-20k": _attp_answer("\n".join(["list_pages(limit=5)"] * 1_000) + "\n__result__ = 1"),
    "dotted-20k": _attp_answer("__result__ = 1", "a" + ".a" * 10_000 + " = 1\n"),
    "dotted-98k": _attp_answer("__result__ = 1", "a" + ".a" * 49_000 + " = 1\n"),
}
ATTP_CASES = [
    pytest.param(
        peer,
        shape,
        id=f"{peer}-{shape}",
        marks=[pytest.mark.bench_very_slow]
        if (peer, shape) == ("tomllib", "dotted-98k")
        else [pytest.mark.bench_slow]
        if (peer, shape) == ("tomllib", "dotted-20k")
        else [],
    )
    for shape in ATTP_ANSWERS
    for peer in ("memci", "tomllib")
]


@pytest.mark.parametrize(("peer", "shape"), ATTP_CASES)
def test_attp_parse(benchmark: Any, request: pytest.FixtureRequest, peer: str, shape: str) -> None:
    text = ATTP_ANSWERS[shape]
    benchmark.group = f"attp_parse-{shape}"
    benchmark.extra_info.update(workload="attp_parse", peer=peer, size=shape, chars=len(text))
    if peer == "memci":
        code, refusal = harness.measure(benchmark, memci._core.read_attp_call, lambda: ((text,), {}))
    else:

        def read() -> tuple[str | None, str | None]:
            try:
                return tomllib.loads(text)["tool_call"]["code"], None
            except tomllib.TOMLDecodeError as e:
                return None, str(e)

        code, refusal = harness.measure(benchmark, read, slow=harness.is_slow(request))
    if shape.startswith("dotted"):
        # The core refuses a key nested past 80 levels; tomllib reads it.
        assert (code is None and refusal is not None) if peer == "memci" else refusal is None
    else:
        assert refusal is None
        assert code is not None
        assert code.endswith("__result__ = [a, list_pages(5)]\n" if shape == "typical" else "1\n")
