"""Saving and loading a context system: everything comes back exactly, and a bad state is named."""

from __future__ import annotations

import copy
import json
import tracemalloc
from dataclasses import replace
from typing import Any

import memci
import pytest
from context_helpers import (
    DictStorage,
    FixedSummarizer,
    assistant,
    calling,
    interaction,
    make,
    run_rounds,
    tool,
    user,
    words,
)
from hypothesis import given
from hypothesis import strategies as st
from memci import ops
from memci.context.contents import RULES, DroppedEntries, DroppedEntry
from memci.context.state import SavedState, dropped_records, dropped_text


def busy(storage: memci.Storage | None = None) -> memci.ContextSystem:
    """A system with archived, recalled, dropped and active pages, mid-page."""
    ctx = make(
        active_pages=2,
        storage=storage or DictStorage(),
        summarizer=FixedSummarizer(),
        policy=memci.ArchivePolicy(unrecalled_rounds=3, unchanged_rounds=5, contents_max_tokens=500),
        max_context_tokens=100_000,
        cache_stable=False,  # the seed's per-round rules: pages archived and entries dropped by now
        tools="attp",
    )
    run_rounds(ctx, 1, 8)
    ctx.recall(5)
    ctx.recall(1)  # dropped by m: comes back
    ctx.add(user("Question 9: one more?"))
    return ctx


def loaded(ctx: memci.ContextSystem) -> memci.ContextSystem:
    ctx.save()
    return memci.ContextSystem.load(ctx.storage, summarizer=FixedSummarizer(), counter=words)


def test_load_restores_everything_exactly():
    ctx = busy()
    assert ctx.dropped, "the fixture drops some entries"
    again = loaded(ctx)
    assert again.state() == ctx.state()
    assert again.round == ctx.round
    assert [p.messages() for p in again.pages] == [p.messages() for p in ctx.pages]
    assert again.contents == ctx.contents
    assert again.dropped == ctx.dropped
    assert again.policy == ctx.policy
    assert (again.active_pages, again.max_context_tokens, again.encoding) == (2, 100_000, "o200k_base")
    assert again.build_messages(sanitize=False) == ctx.build_messages(sanitize=False)


def test_a_loaded_system_carries_on_where_it_stopped():
    ctx = busy()
    again = loaded(ctx)
    for system in (ctx, again):
        assert system.add(assistant("Here it is.")) == 9, "the open page is still open"
        assert system.add(user("Question 10")) == 10
        system.end_round()
        system.recall(3)
    assert again.state() == ctx.state()


def test_the_state_is_plain_json_with_a_version():
    ctx = busy()
    ctx.save()
    state = ctx.storage.load_state()
    assert state is not None
    assert state["version"] == 1
    assert state["kind"] == "memci.ContextSystem"
    assert [p["index"] for p in state["pages"]] == [8, 9]


def test_a_saved_state_reads_back_as_the_dict_it_was_written_as():
    state = busy().state()
    saved = SavedState.from_dict(copy.deepcopy(state))
    assert saved.to_dict() == state
    assert [index for index, _ in saved.pages] == [8, 9]
    assert all(isinstance(e, memci.ContentsEntry) for e in saved.contents)
    assert [d.rule for d in saved.dropped] == [d["rule"] for d in dropped_records(state["dropped"])]


def test_dropped_entries_are_written_as_one_string_of_rows_and_read_back_exactly():
    ctx = busy()
    state = ctx.state()
    assert isinstance(state["dropped"], str)
    rows = dropped_records(state["dropped"])
    assert [int(r["index"]) for r in rows] == [d.index for d in ctx.dropped]
    assert rows == [{k: str(v) for k, v in d.to_dict().items()} for d in ctx.dropped]
    assert SavedState.from_dict(copy.deepcopy(state)).dropped == tuple(ctx.dropped)


def _as_records(state: dict[str, Any]) -> None:
    """``state['dropped']`` as a state saved before rows wrote it: a list of dicts of ints."""
    rows = dropped_records(state["dropped"])
    state["dropped"] = [{k: v if k == "rule" else int(v) for k, v in r.items()} for r in rows]


def _leading_zeros(state: dict[str, Any]) -> None:
    """``state['dropped']``'s entries spelled with a leading zero in each row's index."""
    state["dropped"] = ";".join("0" + row for row in state["dropped"].split(";"))


@pytest.mark.parametrize("respell", [_as_records, _leading_zeros], ids=["list-of-dicts", "leading-zeros"])
def test_dropped_entries_spelled_otherwise_load_and_are_saved_as_a_save_writes_them(respell: Any):
    """A state saved before rows (a list of dicts), or rows a save would not write (leading
    zeros): the same entries come back, and the next save writes the rows as saves do."""
    ctx = busy()
    ctx.save()
    state = copy.deepcopy(ctx.storage.load_state())
    assert state is not None
    text = state["dropped"]
    respell(state)
    assert state["dropped"] != text
    ctx.storage.save_state(state)
    again = memci.ContextSystem.load(ctx.storage, summarizer=FixedSummarizer(), counter=words)
    assert again.dropped == ctx.dropped
    again.save()
    assert again.storage.load_state()["dropped"] == text


_ENTRY = st.builds(
    DroppedEntry,
    st.integers(1, 40),
    st.integers(0, 9),
    st.integers(0, 9),
    st.integers(0, 9),
    st.integers(0, 9),
    st.sampled_from(RULES),
)


@given(st.lists(st.tuples(st.sampled_from(["add", "pop", "text", "copy"]), _ENTRY), max_size=60))
def test_dropped_entries_keep_the_rows_a_join_of_every_entry_gives(steps: list[tuple[str, DroppedEntry]]):
    """Whatever was added, taken out, read or copied in between, the kept text is the join of the
    entries' rows in the order they were dropped, as a save wrote it before it was kept."""
    kept, model = DroppedEntries(), {}
    for step, entry in steps:
        if step == "add":
            kept.add(entry)
            model[entry.index] = entry
        elif step == "pop":
            assert kept.pop(entry.index) == model.pop(entry.index, None)
        elif step == "copy":
            other = kept.copy()
            other.add(replace(entry, index=entry.index + 100))  # changes the copy only
            assert other.text().startswith(kept.text())
        else:
            assert kept.text() == dropped_text(tuple(model.values()))
        assert list(kept.values()) == list(model.values())
    assert kept.text() == dropped_text(tuple(model.values()))
    assert DroppedEntries(list(model.values()), kept.text()).text() == kept.text()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("1,0,0,1,5", "state['dropped'][0] is '1,0,0,1,5', expected index,recall_count"),
        ("1,0,0,1,5,lru;2,0,x,1,5,lru", "state['dropped'][1]['last_recall_round'] is 'x'"),
        ("1,-1,0,1,5,lru", "state['dropped'][0]['recall_count'] is '-1'"),
        ("1,0,0,1,\u0665,lru", "state['dropped'][0]['dropped_round']"),
        ("1,0,0,1," + "9" * 40 + ",lru", "state['dropped'][0]['dropped_round']"),
        ("1,0,0,1,5,whim", "state['dropped'][0]['rule'] is 'whim'"),
        ("1,0,0,1,5,lru;", "state['dropped'][1] is ''"),
        ("1,0,0,1,5,lru;1,0,0,1,5,lru", "listed twice"),
    ],
)
def test_a_bad_dropped_row_is_a_state_error_naming_the_entry_and_field(text: str, named: str):
    state = busy().state()
    state["dropped"] = text.encode().decode("unicode_escape")
    with pytest.raises(memci.StateError) as caught:
        SavedState.from_dict(state)
    assert named in str(caught.value)


@pytest.mark.parametrize("state", [None, [], "state"])
def test_a_saved_state_must_be_a_dict(state: object):
    with pytest.raises(memci.StateError, match="not a dict"):
        SavedState.from_dict(state)


def test_loading_an_empty_storage_is_a_state_error():
    with pytest.raises(memci.StateError, match="holds no saved state"):
        memci.ContextSystem.load(DictStorage(), counter=words)


def _tampered(change: Any) -> DictStorage:
    ctx = busy()
    ctx.save()
    storage = ctx.storage
    assert isinstance(storage, DictStorage)
    state = copy.deepcopy(storage.load_state())
    _as_records(state)  # the tampering below edits dropped entries as dicts
    change(state)
    storage.save_state(state)
    return storage


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda s: s.update(version=2), "version 2"),
        (lambda s: s.update(kind="other"), "kind 'other'"),
        (lambda s: s.pop("round"), "state['round']"),
        (lambda s: s.update(round="3"), "state['round']"),
        (lambda s: s.update(active_pages=0), "active_pages"),
        (lambda s: s["policy"].update(lru_floor=2), "lru_floor"),
        (lambda s: s["policy"].update(surprise=1), "unknown keys ['surprise']"),
        (lambda s: s.update(next_index=4), "next_index"),
        (lambda s: s["pages"][0].update(index="8"), "state['pages'][0]['index']"),
        (lambda s: s["pages"][1]["messages"].append({"role": "robot", "content": "x"}), "state['pages'][1]"),
        (lambda s: s["pages"].reverse(), "state['pages'][1]"),
        (lambda s: s["contents"][0].pop("summary"), "state['contents'][0]['summary']"),
        (lambda s: s["dropped"][0].update(rule="whim"), "state['dropped'][0]['rule']"),
        (lambda s: s.update(system_prompt="hi"), "state['system_prompt']"),
    ],
)
def test_a_tampered_state_is_a_state_error_naming_the_part(change: Any, named: str):
    storage = _tampered(change)
    with pytest.raises(memci.StateError) as caught:
        memci.ContextSystem.load(storage, counter=words)
    assert named in str(caught.value)


def test_search_finds_archived_pages_dropped_ones_included_and_is_rebuilt_on_load():
    ctx = busy()
    dropped = ctx.dropped[0].index
    hits = ctx.search(f"item {dropped}", k=3)
    assert dropped in [h.page_index for h in hits]
    again = loaded(ctx)
    assert [h.page_index for h in again.search(f"item {dropped}", k=3)] == [h.page_index for h in hits]


class ReadCountingStorage(DictStorage):
    """A :class:`DictStorage` that counts the pages read from it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_page(self, index: int) -> dict[str, Any] | None:
        self.reads += 1
        return super().get_page(index)


def test_a_load_reads_no_page_and_the_first_search_reads_the_stored_ones_once():
    ctx = busy(storage=ReadCountingStorage())
    ctx.save()
    store = ctx.storage
    assert isinstance(store, ReadCountingStorage)
    store.reads = 0
    again = memci.ContextSystem.load(store, summarizer=FixedSummarizer(), counter=words)
    again.build_messages()
    assert store.reads == 0, "a load costs the state, not the archive"
    queries = [f"item {n}" for n in range(1, 9)]
    assert [again.search(q, k=3) for q in queries] == [ctx.search(q, k=3) for q in queries]
    assert store.reads == len(store.pages), "each stored page read once, at the first search"
    again.search("item 2")
    assert store.reads == len(store.pages)


def test_after_a_load_pages_archived_later_are_found_once_and_forgotten_ones_never():
    ctx = busy()
    again = loaded(ctx)
    run_rounds(again, 9, 12)  # archives more pages before the first search
    run_rounds(ctx, 9, 12)
    again.save()
    for n in (2, 7, 10):
        assert again.search(f"item {n}", k=4) == ctx.search(f"item {n}", k=4)
    forgetting = loaded(busy())
    forgetting.clear(forget=True)
    assert forgetting.search("item 2") == []
    forgetting.save()
    assert memci.ContextSystem.load(forgetting.storage, counter=words).search("item 2") == []


@pytest.mark.parametrize("store", ["memory", "sqlite", "directory"])
def test_every_store_round_trips_the_whole_system(store: str, tmp_path: Any):
    def open_store() -> memci.Storage:
        if store == "sqlite":
            return memci.SqliteStorage(str(tmp_path / "context.db"))
        if store == "directory":
            return memci.DirectoryStorage(str(tmp_path / "pages"))
        return memory

    memory = memci.MemoryStorage()
    ctx = busy(storage=open_store())
    ctx.save()
    expected = ctx.state()
    if store != "memory":
        ctx.storage.close()
    again = memci.ContextSystem.load(open_store(), summarizer=FixedSummarizer(), counter=words)
    assert again.state() == expected
    assert again.recall(2).messages() == interaction(2)
    assert [h.page_index for h in again.search("item 2", k=1)] == [2]


def test_the_state_shares_nothing_with_the_caller_or_the_system():
    prompt = {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
    ctx = memci.ContextSystem(prompt, storage=DictStorage(), counter=words)
    prompt["content"][0]["text"] = "changed"
    state = ctx.state()
    state["system_prompt"]["content"].append("junk")
    assert ctx.state()["system_prompt"] == {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}


# ---- a state that contradicts itself ------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda s: s["contents"].append(copy.deepcopy(s["contents"][0])), "is listed twice"),
        (lambda s: s["dropped"].append({**s["dropped"][0], "index": s["contents"][0]["index"]}), "listed twice"),
        (lambda s: s["contents"][0].update(index=99), "state['contents'][0]['index'] is 99, expected 1 to 7"),
        (lambda s: s["dropped"][0].update(index=0), "state['dropped'][0]['index'] is 0"),
        (lambda s: s.update(round=-1), "state['round'] is -1"),
        (lambda s: s["contents"][0].update(recall_count=-2), "recall_count'] is -2"),
        (lambda s: s["contents"][0].update(last_recall_round=10**6), "last_recall_round'] is 1000000"),
        (lambda s: s["dropped"][0].update(dropped_round=-5), "dropped_round'] is -5"),
        (lambda s: s["pages"][1].update(index=2**70), "state['pages'][1]['index'] is 1180591620717411303424"),
        (
            lambda s: s.update(next_index=2**70, pages=[], pages_through=2**70 - 1),
            "state['next_index'] is 1180591620717411303424, expected",
        ),
        (lambda s: s.update(revision=-1), "state['revision']"),
    ],
)
def test_a_state_that_contradicts_itself_is_a_state_error_naming_the_part(change: Any, named: str):
    storage = _tampered(change)
    with pytest.raises(memci.StateError) as caught:
        memci.ContextSystem.load(storage, counter=words)
    assert named in str(caught.value)


def _mutations(state: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``state`` with one to three of its numbers, lists or keys changed at random."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (*path, i))

    walk(state, ())
    replacements = st.sampled_from([-1, 0, 1, 7, 2**63, 2**70, None, "x", [], {}, True, 1.5])

    def mutate(changes: list[tuple[tuple[Any, ...], Any, bool]]) -> dict[str, Any]:
        out = copy.deepcopy(state)
        for path, value, drop in changes:
            if not path:
                continue
            parent = out
            try:
                for key in path[:-1]:
                    parent = parent[key]
                if drop and isinstance(parent, dict):
                    parent.pop(path[-1], None)
                elif drop and isinstance(parent, list):
                    parent.append(copy.deepcopy(parent[path[-1]]))  # a duplicate
                else:
                    parent[path[-1]] = copy.deepcopy(value)  # one [] or {} at two paths would hold itself
            except (KeyError, IndexError, TypeError):
                continue
        return out

    return st.lists(st.tuples(st.sampled_from(paths), replacements, st.booleans()), min_size=1, max_size=3).map(mutate)


def edited() -> memci.ContextSystem:
    """A cache-stable system with context edits whose boundaries moved at its cut (the state holds them)."""
    edits = [ops.ClearToolUses(keep=1, exclude_tools=["never"]), ops.ClearThinking()]
    ctx = make(active_pages=2, cache_stable=True, summarizer=FixedSummarizer(), context_edits=edits)
    for n in range(1, 6):
        ctx.extend([user(f"Question {n}"), calling(f"call_{n}"), tool(f"call_{n}", "item " * 80), assistant("ok")])
        ctx.build_messages()
        ctx.end_round()
    return ctx


@given(data=st.data())
def test_a_mutated_state_loads_into_a_working_system_or_is_a_state_error(data: st.DataObject):
    original = edited() if data.draw(st.booleans()) else busy()
    original.save()
    state = original.storage.load_state()
    assert state is not None
    if data.draw(st.booleans()):
        _as_records(state)  # dropped entries as a state saved before rows wrote them
    mutated = data.draw(_mutations(state))
    storage = DictStorage()
    storage.pages = dict(original.storage.pages)  # type: ignore[attr-defined]
    storage.state = json.dumps(mutated)
    try:
        ctx = memci.ContextSystem.load(storage, summarizer=FixedSummarizer(), counter=words)
    except memci.StateError:
        return
    # Whatever loads is a system that works: it takes a turn, builds, recalls what it lists, saves.
    ctx.add(user("after the load"))
    ctx.add(assistant("fine"))
    ctx.end_round()
    try:
        ctx.build_messages()
    except memci.ContextOverflowError:
        # A legitimate answer only to a limit the mutation made smaller than the window can be.
        assert ctx.max_context_tokens is not None
        assert ctx.max_context_tokens < 100_000
    for entry in ctx.contents:
        ctx.recall(entry.index)
    ctx.save()


@pytest.mark.parametrize("forget", [False, True])
def test_an_empty_window_after_archived_pages_loads_and_goes_on(forget: bool) -> None:
    # clear() (or popping the open page's last message) leaves no active page and a next index
    # above 1: the loaded system gives the next index, not 1 again.
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem(storage=store, active_pages=2)
    ctx.extend([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    ctx.clear(forget=forget)
    ctx.save()
    loaded = memci.ContextSystem.load(store)
    assert loaded.pages == []
    assert loaded.state() == ctx.state()
    assert loaded.add({"role": "user", "content": "c"}) == 3
    if forget:
        with pytest.raises(memci.PageError, match="forgotten"):
            loaded.recall(1)
    else:
        assert loaded.recall(1).messages() == [{"role": "user", "content": "a"}]


# ---- a state costs what it holds, whatever indices it claims ---------------------------------------------


def _claiming(index: int) -> dict[str, Any]:
    """A small state (about 500 bytes of JSON) whose one active page is page ``index``: it claims
    ``index - 1`` archived pages it does not hold."""
    state = memci.ContextSystem("Be brief.", counter=words).to_state()
    state.update(pages=[{"index": index, "messages": [user("hi")]}], next_index=index + 1, pages_through=index - 1)
    return state


@pytest.mark.parametrize("load", ["from_state", "load"])
def test_a_small_state_claiming_a_huge_index_costs_what_it_holds(load: str):
    state = _claiming(50_000_000)
    assert len(json.dumps(state)) < 600
    storage = DictStorage()
    tracemalloc.start()
    try:
        if load == "from_state":
            with pytest.raises(memci.StateError, match=r"neither it nor the storage holds \(1, 2, 3, 4, 5, \.\.\.\)"):
                memci.ContextSystem.from_state(state, storage, counter=words)
        else:
            storage.save_state(state)
            ctx = memci.ContextSystem.load(storage, counter=words)  # the store lost them: a recall says so
            with pytest.raises(memci.PageError, match="storage does not hold it"):
                ctx.recall(49_999_999)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # the claimed range was never enumerated (it took 2 GB)


def test_from_state_names_the_gap_in_the_archived_pages_the_storage_holds():
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 4)  # pages 1 to 3 archived
    ctx.save()
    storage = ctx.storage
    assert isinstance(storage, DictStorage)
    del storage.pages[2]
    with pytest.raises(memci.StateError, match=r"holds \(2\)$"):
        memci.ContextSystem.from_state(ctx.to_state(), storage, counter=words)
