"""DEBUG log events on ``memci.context``: archive, drop and recall, each with the page index, the
round and the reason."""

from __future__ import annotations

import logging

import memci
import pytest
from context_helpers import FixedSummarizer, make, run_rounds, user


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, int, str]]:
    return [
        (r.getMessage().split(" ")[0], r.page_index, r.round, r.reason)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "memci.context" and hasattr(r, "page_index")
    ]


def test_archive_drop_and_recall_are_logged_with_page_round_and_reason(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger="memci.context")
    policy = memci.ArchivePolicy(unrecalled_rounds=2, unchanged_rounds=3)
    ctx = make(active_pages=1, summarizer=FixedSummarizer(), policy=policy)
    run_rounds(ctx, 1, 2)  # page 1 archived in round 1 (when page 2 opened)
    ctx.recall(1)
    run_rounds(ctx, 3, 4)
    assert events(caplog) == [
        ("archive", 1, 1, "active_pages"),
        ("recall", 1, 2, "recall"),
        ("archive", 2, 2, "active_pages"),
        ("archive", 3, 3, "active_pages"),
        ("drop", 2, 4, "unrecalled"),
    ]
    caplog.clear()
    ctx.clear()
    assert events(caplog) == [
        ("archive", 4, 4, "clear"),
        ("drop", 1, 4, "cleared"),
        ("drop", 3, 4, "cleared"),
        ("drop", 4, 4, "cleared"),
    ]


def test_nothing_is_formatted_above_debug(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="memci.context")
    ctx = make(active_pages=1)
    ctx.add(user("a"))
    ctx.add(user("b"))
    assert [r for r in caplog.records if r.name == "memci.context"] == []
