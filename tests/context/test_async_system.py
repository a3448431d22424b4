"""AsyncContextSystem (docs/context-system.md, "Async"): the scripted agent loop on every async
store, cross-checked message for message and state for state against the sync ContextSystem; sync
and async systems continuing each other's conversations on one SQLite file and one Redis prefix;
two async writers racing; async summarizers awaited on the loop; and the loop kept running while a
slow sync summarizer or store works (counted in ticks, never timed)."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import memci
import pytest
from context_helpers import DictStorage, FixedSummarizer, interaction, user
from memci import AsyncContextSystem, ConflictError, ContextSystem, InvalidOperationError, SummaryError
from memci.context.summary import PageSummary
from memci.storage import AsyncRedisStorage, AsyncSqliteStorage, ThreadedStorage

pytest.importorskip("aiosqlite", reason="the aiosqlite package is not installed (pip install 'memci[async]')")

Message = dict[str, Any]
PROMPT = "You are a careful agent."


def recall_call(call_id: str, page_index: int) -> Message:
    arguments = json.dumps({"page_index": page_index})
    function = {"name": "recall_page", "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


@pytest.fixture(params=["sqlite", "redis", "threaded", "sync"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[], Any]:
    """A new store object on one place each call: async SQLite, async Redis, a thread-wrapped sync
    SQLite store, or a sync SQLite store given to the async system as it is."""
    path = tmp_path / "agent.db"
    if store_kind == "sqlite":
        return lambda: AsyncSqliteStorage(path)
    if store_kind == "redis":
        url, prefix = request.getfixturevalue("redis_url"), f"test-{uuid.uuid4().hex}:"
        return lambda: AsyncRedisStorage(url, prefix=prefix)
    if store_kind == "threaded":
        return lambda: ThreadedStorage(memci.SqliteStorage(path))
    return lambda: memci.SqliteStorage(path)


async def close(store: Any) -> None:
    result = store.close()
    if asyncio.iscoroutine(result):
        await result


async def turn(actx: AsyncContextSystem, ctx: ContextSystem, n: int) -> None:
    """Round ``n`` of the scripted agent, on the async system and the sync one alike: a question, a
    tool call and its answer; from round 5 on the model first recalls page ``n - 4``."""
    for message in interaction(n)[:1]:
        assert await actx.add(message) == ctx.add(message)
    if n >= 5:
        call = recall_call(f"recall_{n}", n - 4)
        assert await actx.add(call) == ctx.add(call)
        (tool_call,) = call["tool_calls"]
        assert actx.is_recall_call(tool_call)
        answer = await actx.handle_tool_call(tool_call)
        assert answer == ctx.handle_tool_call(tool_call)
        assert json.loads(answer["content"])["page"] == n - 4
        await actx.add(answer)
        ctx.add(answer)
    for message in interaction(n)[1:]:
        await actx.add(message)
        ctx.add(message)
    assert await actx.build_messages() == ctx.build_messages()
    assert await actx.end_round() == ctx.end_round()


async def test_the_scripted_agent_loop_matches_the_sync_system_and_continues_across_instances(
    open_store: Callable[[], Any],
) -> None:
    store = open_store()
    actx = AsyncContextSystem(PROMPT, storage=store, active_pages=2)
    ctx = ContextSystem(PROMPT, storage=memci.MemoryStorage(), active_pages=2)
    for n in range(1, 8):
        await turn(actx, ctx, n)
        if n % 2 == 0:
            await actx.save()
            ctx.save()
    assert [e.index for e in await actx.contents()] == [e.index for e in ctx.contents]
    assert [p.index for p in await actx.pages()] == [6, 7]
    assert (await actx.recall(2)).messages() == ctx.recall(2).messages()
    hits = await actx.search("item 3")
    assert hits == ctx.search("item 3")
    assert hits[0].page_index == 3
    assert await actx.list_pages() == ctx.list_pages()
    assert await actx.token_count() == ctx.token_count()
    assert await actx.contents_text() == ctx.contents_text()
    await actx.save()
    ctx.save()
    assert await actx.state() == ctx.state()

    other = open_store()  # another process, say: a new store object on the same file or prefix
    again = await AsyncContextSystem.load(other)
    assert await again.state() == ctx.state()
    assert await again.build_messages() == ctx.build_messages()
    assert await again.search("item 3") == ctx.search("item 3")
    await turn(again, ctx, 8)
    await again.save()
    ctx.save()
    assert await again.state() == ctx.state()
    assert (await again.recall(1)).messages() == interaction(1)
    await close(other)
    await close(store)


async def test_sync_and_async_systems_continue_each_others_conversations_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    with memci.SqliteStorage(path) as sync_store:
        ctx = ContextSystem(PROMPT, storage=sync_store, active_pages=1)
        for n in (1, 2, 3):
            ctx.extend(interaction(n))
            ctx.end_round()
        ctx.save()
    async with AsyncSqliteStorage(path) as store:
        actx = await AsyncContextSystem.load(store)
        assert await actx.build_messages() == ctx.build_messages()
        assert (await actx.recall(1)).messages() == interaction(1)  # a page the sync system archived
        await actx.extend(interaction(4))
        await actx.save()
    with memci.SqliteStorage(path) as sync_store:
        later = ContextSystem.load(sync_store)
        assert later.state() == await actx.state()
        assert later.recall(3).messages() == interaction(3)  # a page the async system archived


async def test_sync_and_async_systems_share_a_redis_prefix(redis_url: str) -> None:
    prefix = f"test-{uuid.uuid4().hex}:"
    async with AsyncRedisStorage(redis_url, prefix=prefix) as store:
        actx = AsyncContextSystem(PROMPT, storage=store, active_pages=1)
        for n in (1, 2, 3):
            await actx.extend(interaction(n))
        await actx.save()
        sync_store = memci.RedisStorage(redis_url, prefix=prefix)
        ctx = ContextSystem.load(sync_store)
        assert ctx.recall(2).messages() == interaction(2)
        ctx.add(user("Question 4"))
        ctx.save()
        with pytest.raises(ConflictError):  # the async system's state is now stale
            await actx.save()
        again = await AsyncContextSystem.load(store)
        assert await again.state() == ctx.state()
        sync_store.close()


async def test_two_async_systems_racing_to_save_get_one_conflict(open_store: Callable[[], Any]) -> None:
    first_store, second_store = open_store(), open_store()
    seed = AsyncContextSystem(PROMPT, storage=first_store, active_pages=1)
    await seed.extend(interaction(1))
    await seed.save()
    first, second = await AsyncContextSystem.load(first_store), await AsyncContextSystem.load(second_store)
    await first.add(user("from the first"))
    await second.add(user("from the second"))
    results = await asyncio.gather(first.save(), second.save(), return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == ["ConflictError", "NoneType"]
    loser = second if isinstance(results[1], ConflictError) else first
    with pytest.raises(ConflictError):
        await loser.save()  # still stale: nothing of it was written
    winner_state = await (first if loser is second else second).state()
    third_store = open_store()
    reloaded = await AsyncContextSystem.load(third_store)
    assert await reloaded.state() == winner_state
    await reloaded.add(user("redone"))
    await reloaded.save()  # the redone turn saves over the winner's revision
    for store in (first_store, second_store, third_store):
        await close(store)


class AsyncFixed:
    """An async summarizer object: FixedSummarizer's summaries, awaited; records the threads it ran on."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    async def asummarize(self, page: memci.Page) -> PageSummary:
        await asyncio.sleep(0)
        self.threads.add(threading.get_ident())
        return FixedSummarizer().summarize(page)


async def test_an_async_summarizer_is_awaited_on_the_loop() -> None:
    summarizer = AsyncFixed()
    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=summarizer)
    for n in (1, 2, 3):
        await actx.extend(interaction(n))
    assert summarizer.threads == {threading.get_ident()}, "awaited on the loop's thread"
    assert [(e.summary, e.entry_summaries[0]) for e in await actx.contents()] == [("p1", "p1.0"), ("p2", "p2.0")]


async def test_an_async_def_str_to_str_summarizer_is_awaited_per_entry_and_page() -> None:
    seen: list[str] = []

    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        seen.append(text)
        return text.upper()[:30]

    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=shout)
    await actx.extend([*interaction(1, with_tool=False), *interaction(2, with_tool=False)])
    (entry,) = await actx.contents()
    said = ("user: Question 1: what about item 1?", "assistant: Answer 1: item 1 is fine.")
    assert entry.entry_summaries == tuple(text.upper()[:30] for text in said)
    assert entry.summary == "\n".join(said).upper()[:30]
    assert len(seen) == 3  # two entries, then the page


async def test_async_summarizers_that_break_the_contract_are_summary_errors() -> None:
    class NotAwaitable:
        def asummarize(self, page: memci.Page) -> PageSummary:
            return FixedSummarizer().summarize(page)

    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=NotAwaitable())  # type: ignore[arg-type]
    await actx.extend(interaction(1))
    with pytest.raises(SummaryError, match="not an awaitable"):
        await actx.add(user("Question 2"))
    assert [p.index for p in await actx.pages()] == [1], "the message was taken back"

    async def wrong(page: memci.Page) -> str:
        return "not a summary"

    class Wrong:
        asummarize = staticmethod(wrong)

    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=Wrong())  # type: ignore[arg-type]
    await actx.extend(interaction(1))
    with pytest.raises(SummaryError, match="not a PageSummary"):
        await actx.add(user("Question 2"))


def test_the_sync_system_refuses_an_async_summarizer_naming_the_async_one() -> None:
    async def summarize(text: str) -> str:
        return text

    for summarizer in (summarize, AsyncFixed()):
        with pytest.raises(SummaryError, match=r"use memci\.AsyncContextSystem"):
            ContextSystem(PROMPT, summarizer=summarizer)  # type: ignore[arg-type]


async def ticking(ticks: list[int], enough: threading.Event) -> None:
    """Counts its turns on the loop; sets ``enough`` after five."""
    while not enough.is_set():
        ticks.append(1)
        if len(ticks) >= 5:
            enough.set()
        await asyncio.sleep(0)


async def test_a_slow_sync_summarizer_does_not_block_the_loop() -> None:
    ticks: list[int] = []
    enough = threading.Event()
    waited: list[bool] = []

    class Slow:
        def summarize(self, page: memci.Page) -> PageSummary:
            # Returns only when the ticker has run five times: were this on the loop's thread, the
            # ticker could not run, and the wait would give up (False) after 30 s.
            waited.append(enough.wait(30))
            return FixedSummarizer().summarize(page)

    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=Slow())
    await actx.extend(interaction(1))
    ticker = asyncio.ensure_future(ticking(ticks, enough))
    await actx.add(user("Question 2"))  # archives page 1: the slow summarizer runs
    await ticker
    assert waited == [True]
    assert len(ticks) >= 5


async def test_a_slow_sync_store_does_not_block_the_loop(store_kind: str) -> None:
    ticks: list[int] = []
    enough = threading.Event()
    waited: list[bool] = []

    class SlowStore(DictStorage):
        def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
            waited.append(enough.wait(30))
            super().save_state(state, pages)

    slow = SlowStore()
    storage = ThreadedStorage(slow) if store_kind == "threaded" else slow
    actx = AsyncContextSystem(PROMPT, active_pages=1, storage=storage)
    await actx.extend([*interaction(1), *interaction(2)])
    ticker = asyncio.ensure_future(ticking(ticks, enough))
    await actx.save()
    await ticker
    assert waited == [True]
    assert len(ticks) >= 5
    assert slow.page_indices() == [1]


async def test_coroutines_on_one_system_run_one_at_a_time_in_order() -> None:
    actx = AsyncContextSystem(PROMPT, active_pages=3)
    ctx = ContextSystem(PROMPT, active_pages=3)
    messages = [m for n in range(1, 7) for m in interaction(n)]
    indices = await asyncio.gather(*(actx.add(m) for m in messages))
    assert indices == [ctx.add(m) for m in messages]
    assert await actx.build_messages() == ctx.build_messages()


async def test_a_cancelled_call_finishes_before_the_next_one_runs() -> None:
    release = threading.Event()
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    class Held:
        def summarize(self, page: memci.Page) -> PageSummary:
            loop.call_soon_threadsafe(started.set)
            release.wait(30)
            return FixedSummarizer().summarize(page)

    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=Held())
    await actx.extend(interaction(1))
    adding = asyncio.ensure_future(actx.add(user("Question 2")))
    await started.wait()
    adding.cancel()
    following = asyncio.ensure_future(actx.pages())
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await adding
    assert [p.index for p in await following] == [2], "the cancelled add finished whole first"


async def test_bad_arguments_are_memci_errors_naming_them() -> None:
    with pytest.raises(InvalidOperationError, match="storage must be an AsyncStorage or a Storage"):
        AsyncContextSystem(PROMPT, storage=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="active_pages"):
        AsyncContextSystem(PROMPT, active_pages=0)
    with pytest.raises(memci.StateError, match="holds no saved state"):
        await AsyncContextSystem.load(ThreadedStorage(memci.MemoryStorage()))
    actx = AsyncContextSystem(PROMPT)
    with pytest.raises(memci.InvalidMessageError):
        await actx.add("not a message")  # type: ignore[arg-type]
    with pytest.raises(memci.PageError, match="does not exist"):
        await actx.recall(3)


async def test_open_creates_then_continues_and_pop_and_clear_match_the_sync_system(
    open_store: Callable[[], Any],
) -> None:
    store = open_store()
    actx = await AsyncContextSystem.open(store, PROMPT, active_pages=1)
    ctx = ContextSystem(PROMPT, active_pages=1)
    for n in (1, 2, 3):
        await actx.extend(interaction(n))
        ctx.extend(interaction(n))
    assert await actx.pop() == ctx.pop()
    await actx.save()
    ctx.save()
    other = open_store()
    again = await AsyncContextSystem.open(other, "A new prompt.", max_context_tokens=50_000)
    assert again.max_context_tokens == 50_000
    assert (await again.build_messages())[0] == {"role": "system", "content": "A new prompt."}
    assert await again.build_messages(sanitize=False) != await actx.build_messages(sanitize=False)
    assert (await again.pages())[0].messages() == interaction(3)[:-1]

    await actx.clear()
    ctx.clear()
    assert await actx.state() == ctx.state()
    assert (await actx.search("item 3"))[0].page_index == 3  # cleared, not forgotten
    await actx.clear(forget=True)
    await actx.save()
    listing = store.page_indices() if store_is_sync(store) else await store.page_indices()
    assert listing == []
    for s in (store, other):
        await close(s)


def store_is_sync(store: Any) -> bool:
    return not asyncio.iscoroutinefunction(store.page_indices)


async def test_to_state_and_from_state_round_trip_on_an_async_store(tmp_path: Path) -> None:
    async with AsyncSqliteStorage(tmp_path / "agent.db") as store:
        actx = AsyncContextSystem(storage=store, active_pages=1, agent_tools=[_weather_tool()])
        for n in (1, 2, 3):
            await actx.extend(interaction(n))
        await actx.save()
        state = await actx.to_state()
        again = await AsyncContextSystem.from_state(json.loads(json.dumps(state)), store)
        assert await again.to_state() == state
        assert await again.build_messages() == await actx.build_messages()
        assert again.tool_definitions() == actx.tool_definitions()
        assert again.tool_tokens() == actx.tool_tokens() > 0
        assert (await again.recall(2)).messages() == interaction(2)


def _weather_tool() -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return {
        "type": "function",
        "function": {"name": "weather", "description": "The weather.", "parameters": parameters},
    }


async def test_a_summarizer_calling_back_into_its_system_is_refused_not_deadlocked() -> None:
    holder: list[AsyncContextSystem] = []

    class CallsBack:
        async def asummarize(self, page: memci.Page) -> PageSummary:
            await holder[0].pages()
            return FixedSummarizer().summarize(page)

    actx = AsyncContextSystem(PROMPT, active_pages=1, summarizer=CallsBack())
    holder.append(actx)
    await actx.extend(interaction(1))
    with pytest.raises(InvalidOperationError, match="called back from its own summarizer"):
        await actx.add(user("Question 2"))
    assert [p.index for p in await actx.pages()] == [1], "the add was undone"


def anthropic_turn(n: int) -> list[Message]:
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "lookup", "input": {"q": f"item {n}"}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"item {n} is fine"}
    return [
        {"role": "user", "content": f"Question {n}: what about item {n}?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": f"Answer {n}: item {n} is fine."},
    ]


def anthropic_recall(n: int, page_index: int) -> tuple[list[Message], Any]:
    block = {"type": "tool_use", "id": f"recall_{n}", "name": "recall_page", "input": {"page_index": page_index}}
    return [{"role": "assistant", "content": [block]}], block


def responses_recall(n: int, page_index: int) -> tuple[list[Message], Any]:
    from test_items import call_item

    item = call_item(f"recall_{n}", "recall_page", {"page_index": page_index})
    return [item], item


def answer_message(wire: str, answer: Message) -> Message:
    return {"role": "user", "content": [answer]} if wire == "anthropic" else answer


@pytest.mark.parametrize("wire", ["anthropic", "responses"])
async def test_the_agent_loop_in_the_other_wire_formats_matches_the_sync_system(wire: str, tmp_path: Path) -> None:
    from test_items import turn as responses_turn

    interaction_of, recall_of = {
        "anthropic": (anthropic_turn, anthropic_recall),
        "responses": (responses_turn, responses_recall),
    }[wire]
    # Five active pages would hold every turn but the first: the token limit archives the rest,
    # inside build_messages, with the async summarizer awaited there.
    options: dict[str, Any] = {"tools": wire, "active_pages": 5, "max_context_tokens": 760}  # 365 for the tools
    async with AsyncSqliteStorage(tmp_path / "agent.db") as store:
        actx = AsyncContextSystem(PROMPT, storage=store, summarizer=AsyncFixed(), **options)
        ctx = ContextSystem(PROMPT, summarizer=FixedSummarizer(), **options)
        full_pages = 0  # recalls answered with an archived page (not "still in the window")
        for n in range(1, 7):
            messages = interaction_of(n)
            assert await actx.extend(messages[:1]) == ctx.extend(messages[:1])
            if n >= 4:
                calls, call = recall_of(n, n - 3)
                await actx.extend(calls)
                ctx.extend(calls)
                assert actx.is_recall_call(call)
                answer = await actx.handle_tool_call(call)
                assert answer == ctx.handle_tool_call(call)
                full_pages += f"Question {n - 3}" in json.dumps(answer) or f"city {n - 3}" in json.dumps(answer)
                await actx.add(answer_message(wire, answer))
                ctx.add(answer_message(wire, answer))
            await actx.extend(messages[1:])
            ctx.extend(messages[1:])
            assert await actx.build_messages() == ctx.build_messages()
            assert await actx.end_round() == ctx.end_round()
            await actx.save()
            ctx.save()
        assert await actx.state() == ctx.state()
        assert len(await actx.pages()) < 4, "max_context_tokens archived pages in build_messages"
        assert full_pages >= 1
        again = await AsyncContextSystem.load(store, summarizer=AsyncFixed())
        assert await again.build_messages() == ctx.build_messages()


async def test_an_async_context_system_is_not_copied_or_pickled_but_travels_as_state() -> None:
    import copy
    import pickle

    actx = AsyncContextSystem(PROMPT)
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(InvalidOperationError, match="to_state"):
            attempt(actx)


async def test_the_sync_system_refuses_an_async_store_naming_the_async_system(tmp_path: Path) -> None:
    store = AsyncSqliteStorage(tmp_path / "agent.db")
    with pytest.raises(InvalidOperationError, match=r"AsyncSqliteStorage is async .*use memci\.AsyncContextSystem"):
        ContextSystem(PROMPT, storage=store)  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match=r"use memci\.AsyncContextSystem"):
        ContextSystem.open(store)  # type: ignore[arg-type]
    await store.close()
