"""tests/peer_suites/run.py: reading a suite's JUnit report, the verdict, and the reviewed list."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from peer_suites import run

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.memory.test_session" name="test_plain" file="tests/memory/test_session.py" line="1"/>
<testcase classname="tests.memory.test_session.TestGroup" name="test_in_class[a]" file="tests/memory/test_session.py"
  line="9"><failure message="boom">trace</failure></testcase>
<testcase classname="tests.test_x" name="test_skipped" file="tests/test_x.py" line="3"><skipped message="n"/>
</testcase>
<testcase classname="tests.test_x" name="test_error" file="tests/test_x.py" line="4"><error message="e"/></testcase>
</testsuite></testsuites>
"""


def test_outcomes_are_keyed_by_node_id(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    assert run.outcomes(report) == {
        "tests/memory/test_session.py::test_plain": "passed",
        "tests/memory/test_session.py::TestGroup::test_in_class[a]": "failure",
        "tests/test_x.py::test_skipped": "skipped",
        "tests/test_x.py::test_error": "error",
    }


def test_a_run_that_wrote_no_report_has_no_outcome(tmp_path: Path) -> None:
    assert run.outcomes(tmp_path / "missing.xml") == {}
    native = {"a": "passed"}
    assert run.verdict(native, run.outcomes(tmp_path / "missing.xml"), {}) == ["a"]


def test_the_verdict_is_what_the_native_passes_and_memci_does_not_outside_the_reviewed() -> None:
    native = {"a": "passed", "b": "passed", "c": "passed", "d": "failure", "e": "passed"}
    memci = {"a": "passed", "b": "failure", "c": "error", "d": "failure"}  # e did not run on memci
    assert run.verdict(native, memci, {"c": "internals: reads a private table"}) == ["b", "e"]
    assert run.verdict(native, native, {}) == []


def test_every_reviewed_entry_names_a_known_suite_and_gives_its_reason() -> None:
    with run.REVIEWED.open("rb") as file:
        table = tomllib.load(file)
    assert set(table) <= {suite.name for suite in run.SUITES}
    assert run.reviewed() == table  # each reason begins with its kind
    for entries in table.values():
        for test, reason in entries.items():
            assert "::" in test
            assert len(reason.split(": ", 1)[1]) > 10


def test_a_reviewed_entry_without_a_known_kind_of_reason_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = tmp_path / "reviewed.toml"
    listed.write_text('[suite]\n"tests/test_x.py::test_a" = "it fails on memci"\n')
    monkeypatch.setattr(run, "REVIEWED", listed)
    with pytest.raises(SystemExit, match=r"\[suite\] tests/test_x.py::test_a: a reason begins with one of"):
        run.reviewed()
    listed.write_text('[suite]\n"tests/test_x.py::test_a" = "noop: fails under a no-op swap too"\n')
    assert run.reviewed() == {"suite": {"tests/test_x.py::test_a": "noop: fails under a no-op swap too"}}


def test_a_suite_from_a_checkout_is_skipped_when_its_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    suite = next(suite for suite in run.SUITES if suite.checkout_variable is not None)
    monkeypatch.delenv(suite.checkout_variable, raising=False)  # type: ignore[arg-type]
    assert run.suite_root(suite, Path("/nonexistent-cache")) is None


def test_a_suite_from_a_checkout_takes_its_files_from_the_folder_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = run.llama_index_suite("llama", ("tests/test_x.py",), "swap_llama_index_buffer")
    monkeypatch.setenv(run.LLAMA_INDEX_TESTS, str(tmp_path))
    with pytest.raises(SystemExit, match=rf"MEMCI_LLAMA_INDEX_TESTS={tmp_path}: no llama-index-core/tests folder"):
        run.suite_root(suite, tmp_path / "cache")
    (tmp_path / "llama-index-core" / "tests").mkdir(parents=True)
    assert run.suite_root(suite, tmp_path / "cache") == tmp_path / "llama-index-core"
    assert not (tmp_path / "cache").exists()  # nothing fetched
