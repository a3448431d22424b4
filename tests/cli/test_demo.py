"""``memci demo`` runs end to end (a short run) and shows what it promises."""

from __future__ import annotations

from pathlib import Path

import pytest
from memci import ContextSystem, SqliteStorage
from memci.cli.demo import ACTIVE_PAGES, POLICY, SYSTEM_PROMPT, _converse, main


def test_the_demo_runs_a_conversation_on_sqlite_and_loads_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("COLUMNS", "200")  # no line of the display is cut
    db = tmp_path / "demo.db"
    assert main(["--rounds", "60", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert db.exists()
    for shown in ("What the model is sent after round 40", "contents page", "a recall", "Tokens per round"):
        assert shown in out
    assert "identical state ✓" in out


def test_the_whole_history_counts_every_page_once(tmp_path: Path) -> None:
    """The history line of the display is the tokens of every page (archived ones read back from
    SQLite) beside the system segment: more than the window once pages are archived, and the same
    as counting all the pages afresh at the end."""
    storage = SqliteStorage(str(tmp_path / "demo.db"))
    ctx = ContextSystem(SYSTEM_PROMPT, active_pages=ACTIVE_PAGES, storage=storage, policy=POLICY)
    run = _converse(ctx, 40)
    system = ctx.count_tokens(ctx.build_messages(sanitize=False)[:2])
    pages = [storage.get_page(i) for i in storage.page_indices()]
    archived = sum(ctx.count_tokens(page["messages"]) for page in pages if page is not None)
    active = ctx.count_tokens([m for p in ctx.pages for m in p.messages()])
    assert len(pages) == ctx.pages[0].index - 1 > 0
    assert run.history_tokens[-1] == system + archived + active
    assert run.history_tokens[-1] > 2 * run.window_tokens[-1]
    assert run.history_tokens == sorted(run.history_tokens)
    storage.close()


def test_the_array_tour_still_runs(capsys: pytest.CaptureFixture[str]):
    assert main(["--array"]) == 0
    assert "rollback" in capsys.readouterr().out


def test_an_existing_db_is_refused(tmp_path: Path):
    db = tmp_path / "taken.db"
    db.write_text("")
    with pytest.raises(SystemExit):
        main(["--db", str(db)])
