"""The page log (memci.storage.log): the head every state begins with, staging and committing with
the compare-and-set, what a state claims checked against what the store holds, and the one conflict
policy."""

from __future__ import annotations

from typing import Any

import memci
import pytest
from hypothesis import given
from hypothesis import strategies as st
from memci.storage.log import ConflictPolicy, Head, PageLog


def page(index: int) -> dict[str, Any]:
    return {"index": index, "messages": [{"role": "user", "content": f"m{index}"}]}


def test_a_head_writes_its_keys_first_and_reads_back() -> None:
    head = Head("k", revision=3, pages_through=7, forgotten_through=2)
    state = head.state({"body": 1})
    assert list(state) == ["version", "kind", "revision", "pages_through", "forgotten_through", "body"]
    assert Head.of(state, "k") == head
    assert Head("k").to_dict() == {"version": 1, "kind": "k", "pages_through": 0}  # zeros left out
    assert head.live == range(3, 8)


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ([], "the saved state is list, not a dict"),
        ({"version": 1, "kind": "other"}, "not a saved k of version 1 \\(kind 'other', version 1\\) hint"),
        ({"version": 2, "kind": "k"}, "version 2"),
        ({"version": 1, "kind": "k", "revision": -1}, "state\\['revision'\\] is -1, expected an int >= 0"),
        ({"version": 1, "kind": "k", "pages_through": True}, "state\\['pages_through'\\] is True"),
        ({"version": 1, "kind": "k", "pages_through": 1, "forgotten_through": 2}, "above state\\['pages_through'\\]"),
    ],
)
def test_a_bad_head_is_a_state_error_naming_the_key(state: Any, words: str) -> None:
    with pytest.raises(memci.StateError, match=words):
        Head.of(state, "k", hint=" hint")


def test_a_commit_writes_the_staged_pages_with_the_state_and_a_conflict_leaves_the_log_as_it_was() -> None:
    store = memci.MemoryStorage()
    log, rival = PageLog(store, "k"), PageLog(store, "k")
    log.stage(page(1))
    written = log.commit({"n": 1}, pages_through=1)
    assert written == {"version": 1, "kind": "k", "revision": 1, "pages_through": 1, "n": 1}
    assert store.load_state() == written
    assert (log.staged, log.page(1)) == ([], page(1))
    rival.stage(page(1))
    with pytest.raises(memci.ConflictError):
        rival.commit({"n": 2}, pages_through=1)
    assert (rival.head, rival.staged) == (Head("k"), [page(1)])  # as it was: reload and redo
    assert rival.changed()
    rival.load()
    assert (rival.head.revision, rival.staged) == (1, [])


def test_what_a_state_claims_is_checked_against_what_is_held_without_enumerating_it() -> None:
    store = memci.MemoryStorage()
    for index in (2, 3, 6):
        store.put_page(index, page(index))
    log = PageLog(store, "k")
    log.take({"version": 1, "kind": "k", "pages_through": 10**12, "forgotten_through": 1})
    log.stage(page(4))
    held = log.held()
    assert held == [2, 3, 4, 6]
    assert log.missing(held) == [5, 7, 8, 9, 10]
    assert log.missing(held, 2) == [5, 7]
    assert log.missing(held, 1, first=6) == [7]
    assert log.missing(held, 3, first=2) == [5, 7, 8]
    assert log.holds_run(held, 2, 4)
    assert not log.holds_run(held, 2, 6)
    assert not log.holds_run(held, 4, 3)
    assert log.pages([6, 5]) == [(6, page(6))]


@given(st.sets(st.integers(1, 40)), st.integers(0, 40), st.integers(0, 5))
def test_missing_is_the_first_gaps_of_the_live_range(held_set: set[int], through: int, low: int) -> None:
    low = min(low, through)
    log = PageLog(memci.MemoryStorage(), "k")
    log.take({"version": 1, "kind": "k", "pages_through": through, "forgotten_through": low})
    held = sorted(i for i in held_set if low < i <= through)
    expected = [i for i in range(low + 1, through + 1) if i not in held][:5]
    assert log.missing(held) == expected


def test_the_conflict_policy_redoes_after_each_conflict_then_raises() -> None:
    calls: list[str] = []

    def beaten() -> None:
        calls.append("work")
        raise memci.ConflictError("beaten", revision=1, stored_revision=1)

    policy = ConflictPolicy(retries=3, step=0.0)
    with pytest.raises(memci.ConflictError):
        policy.run(beaten, lambda: calls.append("reload"))
    assert calls == ["work", "reload"] * 3 + ["work"]
    assert len(list(ConflictPolicy(retries=4).waits())) == 4
    assert all(0 <= wait <= 0.02 for wait in ConflictPolicy().waits())
