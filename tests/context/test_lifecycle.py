"""The lifecycle of a context system: ``open`` (load or create), ``pop``, ``clear``, the optional
system prompt, ``to_state``/``from_state``, copies and pickles, and the agent's own tools."""

from __future__ import annotations

import copy
import json
import pickle
import pickletools
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import memci
import pytest
from context_helpers import DictStorage, FixedSummarizer, assistant, interaction, make, run_rounds, user, words

# ---- open -----------------------------------------------------------------------------------------


def test_open_creates_a_system_on_an_empty_store_and_continues_a_saved_one():
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem.open(store, "Be brief.", active_pages=1, counter=words)
    assert ctx.build_messages(sanitize=False)[0] == {"role": "system", "content": "Be brief."}
    run_rounds(ctx, 1, 3)
    ctx.save()
    again = memci.ContextSystem.open(store, "Be brief.", active_pages=1, counter=words)
    assert again.state() == ctx.state()
    assert again.build_messages() == ctx.build_messages()
    again.extend(interaction(4))  # archives page 3 with no "already stored" collision
    again.save()
    assert [p.index for p in again.pages] == [4]
    assert store.page_indices() == [1, 2, 3]


def test_open_applies_the_settings_given_and_keeps_the_others():
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem.open(store, "Old prompt.", active_pages=2, max_context_tokens=5000)
    run_rounds(ctx, 1, 3)
    ctx.save()
    again = memci.ContextSystem.open(store, "New prompt.", agent_tools=[_WEATHER])
    assert again.build_messages(sanitize=False)[0]["content"] == "New prompt."
    assert (again.active_pages, again.max_context_tokens) == (2, 5000)
    assert again.agent_tools == [_WEATHER]
    kept = memci.ContextSystem.open(store)  # nothing given: the saved prompt stays
    assert kept.build_messages(sanitize=False)[0]["content"] == "Old prompt."


_AGENT = textwrap.dedent(
    """
    import sys, memci
    store = memci.SqliteStorage(sys.argv[1])
    ctx = memci.ContextSystem.open(store, "You are a helpful agent.", active_pages=2)
    for n in range(int(sys.argv[2]), int(sys.argv[3])):
        ctx.add({"role": "user", "content": f"question {n}"})
        ctx.add({"role": "assistant", "content": f"answer {n}"})
        ctx.end_round()
        ctx.save()
    print(ctx.round, [p.index for p in ctx.pages], [e.index for e in ctx.contents])
    """
)


@pytest.mark.parametrize("call", [memci.ContextSystem.open, memci.ContextSystem.load, memci.ContextSystem])
def test_a_storage_without_the_storage_methods_is_refused_by_name(call: Any):
    with pytest.raises(memci.InvalidOperationError, match=r"storage must be a memci\.Storage .* got str"):
        call(storage="agent.db") if call is memci.ContextSystem else call("agent.db")


def test_the_readme_pattern_continues_a_conversation_across_processes(tmp_path: Path):
    db = str(tmp_path / "agent.db")
    path = str(Path(memci.__file__).parent.parent)

    def run(first: int, last: int) -> str:
        done = subprocess.run(
            [sys.executable, "-c", _AGENT, db, str(first), str(last)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": path},
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run(1, 5) == "4 [3, 4] [1, 2]"
    assert run(5, 8) == "7 [6, 7] [1, 2, 3, 4, 5]"  # the second process continues the first's rounds
    ctx = memci.ContextSystem.load(memci.SqliteStorage(db))
    assert ctx.recall(5).messages()[0] == user("question 5")
    assert ctx.search("question 2")[0].page_index == 2


# ---- pop ------------------------------------------------------------------------------------------


def test_pop_removes_and_returns_the_last_message():
    ctx = make()
    ctx.extend(interaction(1))
    last = ctx.pop()
    assert last == assistant("Answer 1: item 1 is fine.")
    assert ctx.pages[0].messages() == interaction(1)[:-1]


def test_popping_the_message_that_opened_a_page_removes_the_page_and_gives_its_index_again():
    ctx = make()
    ctx.extend(interaction(1))
    assert ctx.add(user("oops")) == 2
    assert ctx.pop() == user("oops")
    assert [p.index for p in ctx.pages] == [1]
    assert ctx.add(user("again")) == 2
    assert ctx.state()["next_index"] == 3


def test_pop_on_an_empty_window_is_an_error_and_archived_pages_are_never_popped():
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    with pytest.raises(memci.InvalidOperationError, match="pop: the window holds no message"):
        ctx.pop()
    run_rounds(ctx, 1, 2)  # page 1 archived
    for _ in interaction(2):
        ctx.pop()
    before = ctx.state()
    with pytest.raises(memci.InvalidOperationError, match="archived pages are not popped"):
        ctx.pop()
    assert ctx.state() == before
    assert [e.index for e in ctx.contents] == [1]


# ---- clear ----------------------------------------------------------------------------------------


def test_clear_archives_the_window_and_empties_the_contents_page_but_keeps_every_page():
    ctx = make(active_pages=2, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 4)
    ctx.clear()
    assert ctx.pages == []
    assert ctx.contents == []
    assert ctx.contents_text() is None
    assert [(d.index, d.rule) for d in ctx.dropped] == [(i, "cleared") for i in (1, 2, 3, 4)]
    assert ctx.build_messages(sanitize=False) == make().build_messages(sanitize=False)
    assert ctx.search("item 4")[0].page_index == 4
    assert ctx.recall(4).messages() == interaction(4)
    assert [e.index for e in ctx.contents] == [4]  # a recall brings the entry back
    assert ctx.add(user("next")) == 5


def test_clear_is_undone_when_the_summarizer_raises():
    class Failing:
        def summarize(self, page: memci.Page) -> memci.PageSummary:
            raise RuntimeError("model down")

    ctx = make(active_pages=3, summarizer=Failing())
    run_rounds(ctx, 1, 2)
    before = json.dumps(ctx.state())
    with pytest.raises(RuntimeError, match="model down"):
        ctx.clear()
    assert json.dumps(ctx.state()) == before


@pytest.mark.parametrize("kind", ["memory", "sqlite", "directory"])
def test_clear_forget_deletes_the_stored_pages_with_the_next_save(kind: str, tmp_path: Path):
    store: memci.Storage = {
        "memory": memci.MemoryStorage,
        "sqlite": lambda: memci.SqliteStorage(tmp_path / "a.db"),
        "directory": lambda: memci.DirectoryStorage(tmp_path / "dir"),
    }[kind]()
    ctx = memci.ContextSystem("Be brief.", storage=store, active_pages=1, counter=words)
    run_rounds(ctx, 1, 3)
    ctx.save()
    assert store.page_indices() == [1, 2]
    ctx.clear(forget=True)
    assert (ctx.pages, ctx.contents, ctx.dropped, ctx.search("item")) == ([], [], [], [])
    with pytest.raises(memci.PageError, match="page 2 was forgotten"):
        ctx.recall(2)
    assert store.page_indices() == [1, 2]  # nothing is written before the save
    assert memci.ContextSystem.load(store).search("item 2")[0].page_index == 2
    run_rounds(ctx, 4, 6)
    ctx.save()
    assert store.page_indices() == [4, 5]
    loaded = memci.ContextSystem.load(store)
    assert loaded.state() == ctx.state()
    assert [h.page_index for h in loaded.search("item")] == [5, 4] or sorted(
        h.page_index for h in loaded.search("item")
    ) == [4, 5]
    reply = loaded.handle_tool_call({"id": "c", "function": {"name": "recall_page", "arguments": '{"page_index": 1}'}})
    assert "was forgotten" in reply["content"]


def test_clear_refuses_a_forget_that_is_not_a_bool():
    with pytest.raises(memci.InvalidOperationError, match="forget must be a bool"):
        make().clear(forget="yes")  # type: ignore[arg-type]


# ---- the optional system prompt ---------------------------------------------------------------------


@pytest.mark.parametrize("prompt", [None, ""])
def test_without_a_prompt_the_recall_note_is_the_only_system_message(prompt: str | None):
    ctx = memci.ContextSystem(prompt, storage=DictStorage(), counter=words)
    ctx.add(user("hi"))
    sent = ctx.build_messages(sanitize=False)
    assert [m["role"] for m in sent] == ["system", "user"]
    assert "recall_page" in sent[0]["content"]
    assert ctx.state()["system_prompt"] is None
    again = memci.ContextSystem.from_state(ctx.to_state(), ctx.storage, counter=words)
    assert again.build_messages(sanitize=False) == sent
    assert memci.ContextSystem().build_messages() == [sent[0]]


# ---- to_state / from_state ----------------------------------------------------------------------------


def test_to_state_and_from_state_round_trip_through_json():
    ctx = make(active_pages=2, summarizer=FixedSummarizer(), agent_tools=[_WEATHER])
    run_rounds(ctx, 1, 5)
    ctx.recall(1)
    ctx.save()
    state = json.loads(json.dumps(ctx.to_state()))
    again = memci.ContextSystem.from_state(state, ctx.storage, counter=words, summarizer=FixedSummarizer())
    assert again.to_state() == ctx.to_state()
    assert again.build_messages() == ctx.build_messages()
    assert again.tool_definitions() == ctx.tool_definitions()
    again.save()  # the revision came along: the next save follows it


def test_to_state_carries_the_pages_archived_since_the_last_save_and_loads():
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 2)
    ctx.save()
    run_rounds(ctx, 3, 4)  # pages 2 and 3 archived since the save
    state = json.loads(json.dumps(ctx.to_state()))
    assert [page["index"] for page in state["unsaved_pages"]] == [2, 3]
    again = memci.ContextSystem.from_state(state, ctx.storage, counter=words)
    assert again.to_state() == ctx.to_state()
    assert again.recall(3).messages() == interaction(3)  # read from the state: the storage lacks it
    assert ctx.storage.get_page(3) is None
    again.save()  # writes them
    assert ctx.storage.get_page(3)["messages"] == interaction(3)
    assert "unsaved_pages" not in again.to_state()
    assert memci.ContextSystem.load(ctx.storage, counter=words).recall(2).messages() == interaction(2)


def test_from_state_refuses_a_state_naming_pages_neither_it_nor_the_storage_holds():
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 3)  # pages 1 and 2 archived, not saved
    state = ctx.to_state()
    del state["unsaved_pages"]
    with pytest.raises(memci.StateError, match=r"neither it nor the storage holds \(1, 2\)"):
        memci.ContextSystem.from_state(state, DictStorage(), counter=words)
    ctx.save()
    assert memci.ContextSystem.from_state(ctx.to_state(), ctx.storage, counter=words).recall(1).index == 1


@pytest.mark.parametrize(
    ("change", "words_"),
    [
        (lambda pages: pages[0].update(index=9), r"unsaved_pages'\]\[0\]\['index'\] is 9"),
        (lambda pages: pages[0].pop("summary"), r"unsaved_pages'\]\[0\].*no 'summary'"),
        (lambda pages: pages.append("page"), r"unsaved_pages'\]\[1\].*not a dict"),
    ],
)
def test_from_state_refuses_bad_unsaved_pages_naming_them(change: Any, words_: str):
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 2)  # page 1 archived, not saved
    state = ctx.to_state()
    change(state["unsaved_pages"])
    with pytest.raises(memci.StateError, match=words_):
        memci.ContextSystem.from_state(state, DictStorage(), counter=words)


# ---- copies and pickles -----------------------------------------------------------------------------------


def _archived_system(storage: memci.Storage | None = None) -> memci.ContextSystem:
    ctx = memci.ContextSystem("Be brief.", active_pages=1, storage=storage or memci.MemoryStorage())
    run_rounds(ctx, 1, 2)
    ctx.save()
    run_rounds(ctx, 3, 4)  # pages 2 and 3 archived since the save
    return ctx


def test_copy_shares_the_storage_and_carries_unsaved_pages():
    ctx = _archived_system()
    twin = copy.copy(ctx)
    assert twin.storage is ctx.storage
    assert twin.state() == ctx.state()
    assert twin.recall(3).messages() == interaction(3)  # pending in ctx, copied to twin
    assert ctx.contents[-1].recall_count == 0  # the copies go on independently
    twin.save()
    with pytest.raises(memci.ConflictError):
        ctx.save()


def test_deepcopy_and_pickle_restore_a_system_with_its_own_memory_storage():
    ctx = _archived_system()
    for clone in (copy.deepcopy(ctx), pickle.loads(pickle.dumps(ctx))):
        assert clone.storage is not ctx.storage
        assert clone.state() == ctx.state()
        assert clone.build_messages() == ctx.build_messages()
        assert [clone.recall(i).messages() for i in (1, 2, 3)] == [interaction(i) for i in (1, 2, 3)]
        assert clone.search("item 2")[0].page_index == 2
        clone.save()
        assert clone.storage.page_indices() == [1, 2, 3]
    ctx.save()  # the clones saved to their own stores: no conflict here


def test_a_pickle_holds_json_text_and_memci_names_only():
    ctx = _archived_system()
    ctx.add({"role": "user", "content": [{"type": "text", "text": "a block"}], "name": "ann"})
    ops = list(pickletools.genops(pickle.dumps(ctx, protocol=2)))
    names = {arg for op, arg, _ in ops if op.name == "GLOBAL"}
    assert names == {
        "memci.context.persistence _unpickle",
        "memci.context.system ContextSystem",
        "memci.storage.memory _restored",
    }
    strings = [arg for _, arg, _ in ops if isinstance(arg, str)]
    assert "a block" not in strings  # no message is pickled as Python objects...
    assert any('"text":"a block"' in s or '"text": "a block"' in s for s in strings)  # ...it is JSON text
    assert pickle.loads(pickle.dumps(ctx)).pages[-1].messages()[-1]["name"] == "ann"


def test_pickle_reopens_a_sqlite_store_by_path(tmp_path: Path):
    ctx = _archived_system(memci.SqliteStorage(tmp_path / "a.db"))
    clone = pickle.loads(pickle.dumps(ctx))
    assert isinstance(clone.storage, memci.SqliteStorage)
    assert clone.storage.path == tmp_path / "a.db"
    assert clone.recall(2).messages() == interaction(2)
    clone.save()
    with pytest.raises(memci.ConflictError):
        ctx.save()  # one file, two writers: the revision check holds


def test_a_redis_store_pickles_by_its_url_and_one_made_on_a_client_cannot(redis_url: str):
    import redis

    store = memci.RedisStorage(redis_url, prefix=f"pickle-{uuid.uuid4().hex}:")
    ctx = _archived_system(store)
    clone = pickle.loads(pickle.dumps(ctx))
    assert isinstance(clone.storage, memci.RedisStorage)
    assert clone.storage.prefix == store.prefix
    assert clone.recall(1).messages() == interaction(1)
    clone.save()
    with pytest.raises(memci.ConflictError):
        ctx.save()
    on_client = memci.ContextSystem("x", storage=memci.RedisStorage(redis.Redis.from_url(redis_url), prefix="p:"))
    with pytest.raises(memci.StorageError, match="cannot be pickled"):
        pickle.dumps(on_client)
    with pytest.raises(memci.StorageError, match="to_state"):
        copy.deepcopy(on_client)


# ---- the agent's own tools -----------------------------------------------------------------------------

_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_agent_tools_come_first_in_every_format():
    ctx = memci.ContextSystem(agent_tools=[_WEATHER, {"type": "web_search"}])
    parameters = _WEATHER["function"]["parameters"]  # type: ignore[index]
    openai = ctx.tool_definitions("openai")
    assert openai[:2] == [_WEATHER, {"type": "web_search"}]
    assert [t["function"]["name"] for t in openai[2:]] == ["recall_page", "list_pages", "search_pages"]
    anthropic = ctx.tool_definitions("anthropic")
    assert anthropic[0] == {"name": "get_weather", "input_schema": parameters, "description": "The weather in a city."}
    assert [t["name"] for t in anthropic[2:]] == ["recall_page", "list_pages", "search_pages"]
    responses = ctx.tool_definitions("responses")
    assert responses[0] == {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": parameters,
        "strict": None,  # the SDK's FunctionToolParam requires the key
    }
    assert [t["name"] for t in responses[2:]] == ["recall_page", "list_pages", "search_pages"]
    # Given in Anthropic's format, they come back in OpenAI's just the same.
    again = memci.ContextSystem(agent_tools=[anthropic[0]])
    assert again.tool_definitions()[0] == _WEATHER
    assert isinstance(ctx.tool_definitions("attp"), str)


def test_agent_tools_count_against_max_context_tokens():
    plain = memci.ContextSystem("Be brief.")
    tooled = memci.ContextSystem("Be brief.", agent_tools=[_WEATHER])
    text = json.dumps(tooled.tool_definitions("openai"), ensure_ascii=False)
    assert tooled.tool_tokens() == memci.tokens.count(text)
    assert tooled.tool_tokens() > plain.tool_tokens() > 0
    # A limit the messages alone fit, but not with the tools: the window must shrink.
    ctx = memci.ContextSystem("Be brief.", agent_tools=[_WEATHER], summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 3)
    need = ctx.token_count() + ctx.tool_tokens()
    limited = memci.ContextSystem(
        "Be brief.", agent_tools=[_WEATHER], summarizer=FixedSummarizer(), max_context_tokens=need - 1
    )
    run_rounds(limited, 1, 3)
    limited.build_messages()
    assert [p.index for p in limited.pages] != [1, 2, 3]
    assert limited.token_count() + limited.tool_tokens() <= need - 1


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ({"type": "function"}, "agent_tools must be a list"),
        ([42], r"agent_tools\[0\] must be a tool definition dict"),
        ([{"name": "x", "input_schema": {}, "bad": float("nan")}], r"agent_tools\[0\] is not JSON"),
        ([_WEATHER, {"name": "recall_page", "input_schema": {}}], r"agent_tools\[1\] is named 'recall_page'"),
    ],
)
def test_bad_agent_tools_are_refused_by_name(tools: object, message: str):
    with pytest.raises(memci.InvalidOperationError, match=message):
        memci.ContextSystem(agent_tools=tools)  # type: ignore[arg-type]


# ---- feed: a framework's new messages ---------------------------------------------------------------------


def test_feed_ends_the_round_before_a_new_request_then_adds_as_extend_does():
    fed, by_hand = make(active_pages=1), make(active_pages=1)
    for turn in range(1, 5):
        batch = interaction(turn)
        result = fed.feed(batch)
        by_hand.end_round()
        by_hand.extend(batch)
        assert result is not None
        assert result.round == turn
        assert fed.to_state() == by_hand.to_state()
    assert fed.feed([assistant("more")]) is None  # no new request: the round goes on
    tool_results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    assert fed.feed([tool_results]) is None  # tool results join the open page
    assert (fed.round, fed.pages[-1].index) == (4, 4)


def test_feed_refusing_a_message_changes_nothing_the_round_included():
    ctx = make(active_pages=1)
    ctx.feed(interaction(1))
    before = ctx.to_state()
    with pytest.raises(memci.InvalidMessageError, match=r"messages\[1\]"):
        ctx.feed([user("next"), {"role": "nobody", "content": "?"}])
    assert ctx.to_state() == before
