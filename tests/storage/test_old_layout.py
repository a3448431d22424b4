"""Stores written before the page log (tests/fixtures/old_layout, written by memci at commit 9db3fad
with tests/fixtures/write_old_layout.py) load with today's code, and today's writers write the same
pages and the same states."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import memci
import pytest
from fixtures import write_old_layout
from memci.context.state import SavedState, dropped_text
from memci.integrations.langchain import MemciChatMessageHistory
from memci.integrations.openai_agents import MemciSession
from memci.storage.json_store import COMMIT_KEY

OLD = Path(__file__).parent.parent / "fixtures" / "old_layout"


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of the old stores (a load may take the directory store's lock file)."""
    shutil.copytree(OLD, tmp_path / "old")
    return tmp_path / "old"


def test_a_context_system_saved_before_the_page_log_loads(old: Path) -> None:
    ctx = memci.ContextSystem.load(memci.DirectoryStorage(old / "context_system"), counter=write_old_layout.words)
    assert ctx.round == 6
    assert [page.index for page in ctx.pages] == [5, 6]
    assert [(e.index, e.recall_count) for e in ctx.contents] == [(1, 1), (2, 0), (3, 0), (4, 0)]
    assert ctx.recall(3).messages()[1] == {"role": "assistant", "content": "answer 3: 21°C 🙂"}
    assert ctx.search("question 4")[0].page_index == 4
    ctx.add({"role": "user", "content": "question 7"})
    ctx.save()  # the next revision follows the old one
    assert memci.ContextSystem.load(ctx.storage, counter=write_old_layout.words).storage.page_indices()[-1] == 5


def test_a_chat_history_written_before_the_page_log_loads(old: Path) -> None:
    history = MemciChatMessageHistory("chat", storage=memci.DirectoryStorage(old / "chat_history"))
    assert [m.content for m in history.messages] == ["hello", "hi there", "weather?", "sunny"]
    history.add_messages([memci.formats.to_langchain([{"role": "user", "content": "more"}])[0]])
    assert [m.content for m in history.messages][-1] == "more"


async def test_a_session_written_before_the_page_log_loads(old: Path) -> None:
    session = MemciSession("s", storage=memci.DirectoryStorage(old / "session"))
    assert [item["content"] for item in await session.get_items()] == ["a", "b", "c", "e"]
    assert (await session.pop_item()) == {"role": "user", "content": "e"}
    assert [item["content"] for item in await session.get_items()] == ["a", "b", "c"]


def test_the_writers_write_what_they_wrote_before_the_page_log(tmp_path: Path) -> None:
    """Every page byte for byte (a chat history's pages but for their messages, which now keep every
    LangChain field), every state the same JSON value (one key of the session's state,
    ``forgotten_through``, now sits with the other head keys), but for the id of the save that
    wrote it and of the saves before (its trail), which a store now adds (``COMMIT_KEY``: how a lost
    reply is told from a conflict), and for the context system's dropped entries, now written as one
    string of rows (``dropped_text``) in place of a list of dicts."""
    write_old_layout.context_system(tmp_path / "context_system")
    write_old_layout.chat_history(tmp_path / "chat_history")
    asyncio.run(write_old_layout.session(tmp_path / "session"))
    for store in ("context_system", "chat_history", "session"):
        old_pages = sorted((OLD / store / "pages").iterdir())
        new_pages = sorted((tmp_path / store / "pages").iterdir())
        assert [p.name for p in new_pages] == [p.name for p in old_pages], store
        if store == "chat_history":
            continue  # its messages now carry every LangChain field (the lossless history): other bytes
        for old_page, new_page in zip(old_pages, new_pages, strict=True):
            assert new_page.read_bytes() == old_page.read_bytes(), new_page
        old_state = json.loads((OLD / store / "state.json").read_text("utf-8"))
        new_state = json.loads((tmp_path / store / "state.json").read_text("utf-8"))
        trail = new_state.pop(COMMIT_KEY)  # the ids of the save that wrote it and of those before
        assert type(trail) is list, store
        assert trail, store
        assert all(type(commit_id) is str for commit_id in trail), store
        if store == "context_system":
            assert new_state["dropped"] == dropped_text(SavedState.from_dict(old_state).dropped)
            new_state["dropped"] = old_state["dropped"]
        assert new_state == old_state, store
    new_state = json.loads((tmp_path / "context_system" / "state.json").read_text("utf-8"))
    del new_state[COMMIT_KEY]
    new_state["dropped"] = json.loads((OLD / "context_system" / "state.json").read_text("utf-8"))["dropped"]
    written = json.dumps(new_state, ensure_ascii=False, separators=(",", ":"))
    assert written == (OLD / "context_system" / "state.json").read_text("utf-8")  # the same keys in the same order
