"""``memci demo`` runs end to end (a short run) and shows what it promises."""

from __future__ import annotations

from pathlib import Path

import pytest
from memci.cli.demo import main


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


def test_the_array_tour_still_runs(capsys: pytest.CaptureFixture[str]):
    assert main(["--array"]) == 0
    assert "rollback" in capsys.readouterr().out


def test_an_existing_db_is_refused(tmp_path: Path):
    db = tmp_path / "taken.db"
    db.write_text("")
    with pytest.raises(SystemExit):
        main(["--db", str(db)])
