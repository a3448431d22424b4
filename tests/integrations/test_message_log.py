"""The one message log on the page log (memci.integrations.message_log), under the LangChain history
and the Agents SDK session: what a state claims is checked against the pages held, and a load that
fails leaves nothing stale."""

from __future__ import annotations

from pathlib import Path

import memci
import pytest
from memci.integrations.message_log import MessageLog


def _log(path: Path) -> MessageLog:
    return MessageLog(memci.DirectoryStorage(path), "test.log", runs=True)


def test_a_run_missing_a_page_names_the_first_page_missing_in_it(tmp_path: Path) -> None:
    writer = _log(tmp_path)
    for n in range(1, 6):
        writer.append([{"role": "user", "content": f"m{n}"}])
    assert writer.pop() == {"role": "user", "content": "m5"}  # runs [[1, 4, 1]]: page 5 is not live
    (tmp_path / "pages" / "00000003.json").unlink()
    with pytest.raises(memci.StateError, match="names page 3, which the store does not hold"):
        _log(tmp_path).messages()


def test_a_load_that_fails_is_tried_again_not_served_stale(tmp_path: Path) -> None:
    writer, reader = _log(tmp_path), _log(tmp_path)
    writer.append([{"role": "user", "content": "one"}])
    assert [m["content"] for m in reader.messages()] == ["one"]
    writer.append([{"role": "user", "content": "two"}])
    page = tmp_path / "pages" / "00000002.json"
    text = page.read_bytes()
    page.unlink()
    with pytest.raises(memci.StateError, match="names page 2"):
        reader.messages()
    with pytest.raises(memci.StateError, match="names page 2"):
        reader.messages()  # not the messages of before, as if nothing had been written
    page.write_bytes(text)
    assert [m["content"] for m in reader.messages()] == ["one", "two"]


def test_a_log_without_runs_cannot_pop_and_keeps_the_langchain_layout(tmp_path: Path) -> None:
    log = MessageLog(memci.DirectoryStorage(tmp_path))
    log.append([{"role": "user", "content": "a"}])
    with pytest.raises(memci.StateError, match="keeps no runs"):
        log.pop()
    state = memci.DirectoryStorage(tmp_path).load_state()
    assert state == {"version": 1, "kind": "memci.message_log", "revision": 1, "pages_through": 1}
