"""The frameworks' own test suites, run on memci's adapters: ``make peer-suites``.

Each suite in :data:`SUITES` names a framework's distribution, test files from its sdist and a
swap plugin. The sdist of the *installed* version is fetched from the package registry (pip, into
a cache outside the repository; nothing fetched is committed), then its test files run twice, test
bodies unchanged: once as shipped (``native``), once with the plugin rebinding the framework's
class to memci's in the test modules (``memci``). The run fails when a test the native class
passes does not pass on memci, unless ``reviewed.toml`` lists it with its reason.

    python tests/peer_suites/run.py [--suite NAME ...] [--side noop] [--cache DIR]

``--side noop`` adds a third run, rebinding the name to a trivial subclass of the native class,
and checks the entries reviewed as ``noop:`` fail there too (that is their reason).

A suite whose framework ships no tests in its sdist (llama-index-core) takes them from a checkout
of the framework's repository named by an environment variable (``MEMCI_LLAMA_INDEX_TESTS``), and
is skipped, saying so, when the variable is unset.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REVIEWED = HERE / "reviewed.toml"
SIDE_VARIABLE = "MEMCI_PEER_SIDE"
"""The environment variable the swap plugins read: ``native``, ``noop`` or ``memci``."""

REASON_KINDS = ("internals: ", "noop: ")
"""What a reason in ``reviewed.toml`` begins with (the file's header says what each means)."""

SUITE_TIMEOUT = 1800
"""Seconds one side of one suite may take: a hang fails the suite instead of the build."""

TEST_TIMEOUT = 30
"""Seconds one test may take (pytest-timeout): a test that hangs on one side (one that waits for
a private method of the native class to be called) fails alone, and the rest of its suite runs.
The suites' tests take well under a second each."""


@dataclass(frozen=True)
class Suite:
    """One framework suite: its tests, from ``distribution``'s sdist, with ``plugin`` swapping."""

    name: str
    distribution: str
    files: tuple[str, ...]
    plugin: str
    """A module of this folder, loaded with ``pytest -p``: it reads :data:`SIDE_VARIABLE`."""
    keyword: str | None = None
    """A ``pytest -k`` expression choosing the suite's tests in ``files``, when not all of them."""
    options: tuple[str, ...] = ()
    """More pytest options, the same on every side."""
    environment: tuple[tuple[str, str], ...] = ()
    """More environment variables for the pytest runs, the same on every side."""
    checkout_variable: str | None = None
    """When set: the environment variable naming a checkout of the framework's repository, the
    suite's tests coming from its ``checkout_folder`` instead of the sdist (skipped when unset)."""
    checkout_folder: str = ""
    """The distribution's folder inside that checkout (its ``tests`` folder is in it)."""


AGENTS_RUNNER_FILES = (
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_compaction_suffix.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/sandbox/test_memory.py",
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_max_turns.py",
    "tests/test_native_tool_failure_history.py",
    "tests/test_programmatic_tool_calling.py",
    "tests/test_run_impl_resume_paths.py",
    "tests/test_soft_cancel.py",
    "tests/test_tool_batch_failure_history.py",
    "tests/test_tool_failure_boundaries.py",
)

AGENTS_HELPER_SESSION_FILES = (
    "tests/deferred_session_writes/test_compaction.py",
    "tests/deferred_session_writes/test_filters.py",
    "tests/deferred_session_writes/test_max_turns.py",
    "tests/deferred_session_writes/test_pending_write.py",
    "tests/deferred_session_writes/test_recovery.py",
    "tests/deferred_session_writes/test_resume.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_openai_conversations_session.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/models/test_openai_chatcompletions_stream.py",
    "tests/sandbox/test_runtime.py",
    "tests/test_agent_runner.py",
    "tests/test_agent_runner_streamed.py",
    "tests/test_cancel_streaming.py",
    "tests/test_error_logging_redaction.py",
    "tests/test_handoff_history_duplication.py",
    "tests/test_hitl_session_scenario.py",
    "tests/test_invalid_final_output_handler.py",
    "tests/test_max_turns.py",
    "tests/test_prompt_cache_key.py",
    "tests/test_run_impl_resume_paths.py",
    "tests/test_run_state_pending_input.py",
    "tests/test_runner_guardrail_resume.py",
    "tests/test_runner_tracing_disabled.py",
    "tests/test_runtime_symmetry_contract.py",
    "tests/utils/test_simple_session.py",
)

LLAMA_INDEX_TESTS = "MEMCI_LLAMA_INDEX_TESTS"
"""The environment variable naming a checkout of LlamaIndex's repository (run-llama/llama_index),
or any folder holding its ``llama-index-core/tests`` files: llama-index-core's sdist ships none."""


def llama_index_suite(name: str, files: tuple[str, ...], plugin: str) -> Suite:
    """A suite of llama-index-core's test files, from the checkout :data:`LLAMA_INDEX_TESTS` names.

    The files need no conftest: LlamaIndex's ``tests/conftest.py`` imports test helpers and
    packages (openai) they do not use. What they rely on of it is ``IS_TESTING``, which makes the
    chat engines' default LLM LlamaIndex's ``MockLLM``."""
    return Suite(
        name,
        "llama-index-core",
        files,
        plugin,
        options=("--noconftest", "-o", "asyncio_default_fixture_loop_scope=function"),
        environment=(("IS_TESTING", "1"),),
        checkout_variable=LLAMA_INDEX_TESTS,
        checkout_folder="llama-index-core",
    )


SUITES = (
    Suite(
        "agents-session",
        "openai-agents",
        ("tests/memory/test_session.py", "tests/memory/test_session_limit.py"),
        "swap_agents_sqlite",
    ),
    Suite("agents-runner", "openai-agents", AGENTS_RUNNER_FILES, "swap_agents_sqlite"),
    Suite(
        "agents-encrypted", "openai-agents", ("tests/extensions/memory/test_encrypt_session.py",), "swap_agents_sqlite"
    ),
    Suite(
        "agents-async-session",
        "openai-agents",
        ("tests/extensions/memory/test_async_sqlite_session.py",),
        "swap_agents_sqlite",
    ),
    # 1,838 tests, about 2.5 minutes for the two runs (twice that on a busy machine).
    Suite(
        "agents-helper-session",
        "openai-agents",
        AGENTS_HELPER_SESSION_FILES,
        "swap_agents_helper_session",
    ),
    Suite(
        "langchain-history",
        "langchain-core",
        ("tests/unit_tests/chat_history/test_chat_history.py", "tests/unit_tests/runnables/test_history.py"),
        "swap_langchain_history",
    ),
    Suite(
        "langchain-trim",
        "langchain-core",
        ("tests/unit_tests/messages/test_utils.py",),
        "swap_langchain_trim",
        keyword="trim_messages",
    ),
    # Both sides add a trimming middleware to every create_agent (the native side LangChain's
    # trim_messages). The conftest above tests/unit_tests/agents loads langchain-tests' recording
    # fixtures, which these offline tests do not use: it is left out (--confcutdir), and so is the
    # one module that needs langchain-openai.
    Suite(
        "langchain-trim-middleware",
        "langchain",
        ("tests/unit_tests/agents",),
        "swap_langchain_trim_middleware",
        options=(
            "--confcutdir",
            "tests/unit_tests/agents",
            "--ignore",
            "tests/unit_tests/agents/middleware/implementations/test_model_fallback.py",
        ),
    ),
    # Both sides add a trimming pre-model hook (the native side LangChain's trim_messages): the
    # tests must pass as they do with the native hook.
    Suite(
        "langgraph-trim-hook",
        "langgraph-prebuilt",
        ("tests/test_react_agent.py", "tests/test_react_agent_graph.py"),
        "swap_langgraph_trim_hook",
    ),
    # ChatMemoryBuffer -> MemciChatMemory, in its own tests and in the chat engines' that build one.
    llama_index_suite(
        "llama-index-buffer",
        (
            "tests/memory/test_chat_memory_buffer.py",
            "tests/chat_engine/test_simple.py",
            "tests/chat_engine/test_condense_plus_context.py",
        ),
        "swap_llama_index_buffer",
    ),
    # Memory's default chat store (SQLAlchemyChatStore) -> MemciChatStore, for Memory's tests and
    # the chat engines' default memory.
    llama_index_suite(
        "llama-index-memory",
        (
            "tests/memory/test_memory_base.py",
            "tests/memory/test_memory_blocks_base.py",
            "tests/memory/test_memory_custom_chat_store.py",
            "tests/memory/test_memory_read_concurrency.py",
            "tests/chat_engine/test_simple.py",
            "tests/chat_engine/test_context.py",
            "tests/chat_engine/test_condense_plus_context.py",
        ),
        "swap_llama_index_memory",
    ),
)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memci" / "peer-suites"


def sources(distribution: str, cache: Path) -> Path:
    """The unpacked sdist of the installed version of ``distribution``, fetched once into ``cache``."""
    version = importlib.metadata.version(distribution)
    root = cache / f"{distribution}-{version}"
    if (root / ".complete").exists():
        return root
    download = cache / "sdists"
    download.mkdir(parents=True, exist_ok=True)
    # Only this distribution comes as source: its build requirements may come as wheels.
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", distribution]
    subprocess.run([*pip, "-d", download, f"{distribution}=={version}"], check=True)
    stem = f"{distribution.replace('-', '_')}-{version}"
    archive = next(path for path in download.glob("*.tar.gz") if path.name.lower().startswith(stem.lower()))
    with tarfile.open(archive) as sdist:
        sdist.extractall(cache / "unpacked", filter="data")
    unpacked = cache / "unpacked" / archive.name.removesuffix(".tar.gz")
    if root.exists():  # a half-done earlier copy
        shutil.rmtree(root)
    unpacked.replace(root)
    (root / ".complete").touch()
    return root


def suite_root(suite: Suite, cache: Path) -> Path | None:
    """Where ``suite``'s test files are: the checkout its variable names, the unpacked sdist of a
    suite without one, or None when the suite's variable is unset (the suite is skipped)."""
    if suite.checkout_variable is None:
        return sources(suite.distribution, cache)
    checkout = os.environ.get(suite.checkout_variable)
    if not checkout:
        return None
    root = Path(checkout).resolve() / suite.checkout_folder
    if not (root / "tests").is_dir():
        raise SystemExit(f"{suite.checkout_variable}={checkout}: no {suite.checkout_folder}/tests folder there")
    return root


def outcomes(report: Path) -> dict[str, str]:
    """Each test's outcome in a JUnit XML report (by pytest node id): ``passed``, ``failure``,
    ``error`` or ``skipped``; none when pytest wrote no report (it stopped before collecting, on
    an import error in the suite's conftest)."""
    results: dict[str, str] = {}
    if not report.exists():
        return results
    for case in ET.parse(report).getroot().iter("testcase"):
        path = case.get("file", "")
        module = path.removesuffix(".py").replace("/", ".")
        owner = case.get("classname", "").removeprefix(module).lstrip(".")  # a test class, if any
        test = "::".join(part for part in (path, owner, case.get("name", "")) if part)
        kinds = {child.tag for child in case}
        results[test] = next((kind for kind in ("error", "failure", "skipped") if kind in kinds), "passed")
    return results


def run_side(suite: Suite, root: Path, side: str, reports: Path) -> dict[str, str]:
    """Run ``suite``'s files once with the plugin set to ``side``; the outcome of each test."""
    report = reports / f"{suite.name}-{side}.xml"
    environment = dict(os.environ, **dict(suite.environment), **{SIDE_VARIABLE: side})
    environment["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE), environment.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "pytest", "-q", "-p", suite.plugin, "-p", "no:cacheprovider"]
    command += ["--rootdir", str(root), "--junitxml", str(report)]
    if (root / "pyproject.toml").exists():  # a folder of test files alone has none
        command += ["-c", str(root / "pyproject.toml")]
    command += ["-o", "junit_family=xunit1", "-o", "console_output_style=classic", "--timeout", str(TEST_TIMEOUT)]
    command += suite.files
    if suite.keyword is not None:
        command += ["-k", suite.keyword]
    command += suite.options
    report.unlink(missing_ok=True)  # an earlier run's report is no result of this one
    started = time.monotonic()
    try:
        subprocess.run(
            command, cwd=root, env=environment, timeout=SUITE_TIMEOUT, stdout=subprocess.DEVNULL, check=False
        )
    except subprocess.TimeoutExpired:
        print(f"  {suite.name} [{side}]: did not finish in {SUITE_TIMEOUT} s")
        return {}
    results = outcomes(report)
    passed = sum(outcome == "passed" for outcome in results.values())
    print(f"  {suite.name} [{side}]: {passed}/{len(results)} passed in {time.monotonic() - started:.0f} s")
    return results


def reviewed() -> dict[str, dict[str, str]]:
    """``reviewed.toml``: per suite, the tests memci need not pass, each with its reason."""
    with REVIEWED.open("rb") as file:
        table = tomllib.load(file)
    for suite, entries in table.items():
        for test, reason in entries.items():
            if not reason.startswith(REASON_KINDS):
                kinds = ", ".join(repr(kind) for kind in REASON_KINDS)
                raise SystemExit(f"reviewed.toml [{suite}] {test}: a reason begins with one of {kinds}")
    return table


def verdict(native: dict[str, str], memci: dict[str, str], excused: dict[str, str]) -> list[str]:
    """The tests the native class passes and memci's does not, outside ``excused``."""
    return sorted(
        test
        for test, outcome in native.items()
        if outcome == "passed" and memci.get(test) != "passed" and test not in excused
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", action="append", choices=[suite.name for suite in SUITES])
    parser.add_argument("--side", choices=["noop"], help="also run the no-op swap and check the noop: entries")
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--reports", type=Path, default=None, help="where the JUnit reports go (default: the cache)")
    options = parser.parse_args()
    table = reviewed()
    reports = options.reports or options.cache / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    failed = False
    for suite in SUITES:
        if options.suite and suite.name not in options.suite:
            continue
        root = suite_root(suite, options.cache)
        if root is None:
            print(f"  {suite.name}: skipped, {suite.checkout_variable} is unset (a {suite.distribution} checkout)")
            continue
        excused = table.get(suite.name, {})
        native = run_side(suite, root, "native", reports)
        memci = run_side(suite, root, "memci", reports)
        missing = verdict(native, memci, excused)
        if not native:
            print(f"  {suite.name}: the native run gave no result")
            failed = True
        for test in missing:
            print(f"  FAIL {test}: native passed, memci {memci.get(test, 'did not run')}")
        stale = sorted(test for test in excused if memci.get(test) == "passed")
        for test in stale:
            print(f"  note {test}: reviewed, but memci passes it now (remove the entry)")
        if options.side == "noop":
            noop = run_side(suite, root, "noop", reports)
            for test, reason in excused.items():
                if reason.startswith("noop: ") and noop.get(test) == "passed":
                    print(f"  FAIL {test}: reviewed as failing under a no-op swap, but it passes there")
                    failed = True
        failed = failed or bool(missing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
