"""memci.MessageArray against a careful pure-Python store, LangChain and LangGraph, same run.

Each bench checks what it measured, so the single untimed pass in `make test` is a real test."""

# No `from __future__ import annotations`: LangGraph reads the State annotations at run time.
from typing import Any

import memci
import pytest
from conftest import SIZES, history
from pure_python import PyMessageArray, copy_json

# Peers' own deprecation notices (LangChain, LangGraph) are theirs, not ours.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning")

ROLES = ["user", "assistant"]
EXCLUDE = ["secret"]


def label(n: int) -> str:
    return f"{n // 1000}k"


def built(n: int) -> memci.MessageArray:
    return memci.MessageArray(list(history(n)))


def py_built(n: int) -> PyMessageArray:
    p = PyMessageArray()
    for m in history(n):
        p.append(m)
    return p


@pytest.mark.parametrize("n", SIZES, ids=label)
@pytest.mark.parametrize("peer", ["memci", "pure-python-deepcopy", "langchain"])
def test_build(benchmark: Any, n: int, peer: str) -> None:
    benchmark.group = f"build {label(n)}"
    msgs = history(n)
    if peer == "memci":

        def run() -> Any:
            arr = memci.MessageArray()
            for m in msgs:
                arr.append(m)
            return arr

        assert benchmark(run).messages() == list(msgs)
    elif peer == "pure-python-deepcopy":
        assert benchmark(lambda: py_built(n)).visible == list(msgs)
    else:
        pytest.importorskip("langchain_core")
        from langchain_core.chat_history import InMemoryChatMessageHistory
        from langchain_core.messages import convert_to_messages

        lc = convert_to_messages([m for m in msgs if m["role"] != "tool"])

        def run_lc() -> Any:
            h = InMemoryChatMessageHistory()
            for m in lc:
                h.add_message(m)
            return h

        assert len(benchmark(run_lc).messages) == len(lc)


@pytest.mark.parametrize("n", SIZES, ids=label)
@pytest.mark.parametrize("role", ["user", "system"])
@pytest.mark.parametrize("peer", ["memci", "pure-python-scan"])
def test_recent_1000_queries(benchmark: Any, n: int, role: str, peer: str) -> None:
    benchmark.group = f"recent {role} {label(n)}"
    k = 3 if role == "user" else 1
    py = py_built(n)
    if peer == "memci":
        arr = built(n)
        got = benchmark(lambda: [arr.recent(k, role=role) for _ in range(1000)])
    else:
        got = benchmark(lambda: [py.recent_scan(k, role) for _ in range(1000)])
    assert got[-1] == py.recent_scan(k, role)


@pytest.mark.parametrize("n", SIZES, ids=label)
@pytest.mark.parametrize("peer", ["memci", "pure-python", "langchain"])
def test_truncate_keep_last(benchmark: Any, n: int, peer: str) -> None:
    benchmark.group = f"truncate keep_last {label(n)}"
    keep = n // 5
    expected = list(history(n))[n - keep :]
    if peer == "memci":
        arr = built(n)

        def run() -> None:
            arr.rollback(0)
            arr.truncate(keep_last=keep)

        benchmark(run)
        assert arr.messages() == expected
    elif peer == "pure-python":
        py = py_built(n)
        base = py.visible

        def run_py() -> None:
            py.visible = base
            py.truncate_keep_last(keep)

        benchmark(run_py)
        assert py.visible == expected
    else:
        pytest.importorskip("langchain_core")
        from langchain_core.messages import convert_to_messages, trim_messages

        lc = convert_to_messages(list(history(n)))
        out = benchmark(lambda: trim_messages(lc, max_tokens=keep, token_counter=len, strategy="last"))
        assert len(out) == keep


@pytest.mark.parametrize("n", SIZES, ids=label)
@pytest.mark.parametrize("peer", ["memci", "pure-python", "langchain"])
def test_filter_roles_and_exclusion(benchmark: Any, n: int, peer: str) -> None:
    benchmark.group = f"filter {label(n)}"
    msgs = list(history(n))
    expected = [
        m for m in msgs if m["role"] in ROLES and not (isinstance(m["content"], str) and "secret" in m["content"])
    ]
    if peer == "memci":
        arr = built(n)

        def run() -> None:
            arr.rollback(0)
            arr.filter(roles=ROLES, content_excludes=EXCLUDE)

        benchmark(run)
        assert arr.messages() == expected
    elif peer == "pure-python":
        py = py_built(n)
        base = py.visible

        def run_py() -> None:
            py.visible = base
            py.filter(set(ROLES), EXCLUDE)

        benchmark(run_py)
        assert py.visible == expected
    else:
        pytest.importorskip("langchain_core")
        from langchain_core.messages import convert_to_messages, filter_messages

        lc = convert_to_messages(msgs)

        # filter_messages has no content condition: the exclusion is one list comprehension after it.
        def run_lc() -> list[Any]:
            kept = filter_messages(lc, include_types=["human", "ai"])
            return [m for m in kept if not (isinstance(m.content, str) and "secret" in m.content)]

        assert len(benchmark(run_lc)) == len(expected)


@pytest.mark.parametrize("n", SIZES, ids=label)
@pytest.mark.parametrize("peer", ["memci", "pure-python-deepcopy", "langgraph"])
def test_100_snapshots_then_rollback(benchmark: Any, n: int, peer: str) -> None:
    benchmark.group = f"snapshots {label(n)}"
    msgs = list(history(n))
    step = max(1, n // 100)
    extra = [{"role": "user", "content": f"one percent more, message {i}"} for i in range(100 * step)]
    if peer == "memci":

        def run() -> memci.MessageArray:
            arr = memci.MessageArray(msgs)
            cps = []
            for i in range(100):
                cps.append(arr.checkpoint())
                arr.append(extra[i * step : (i + 1) * step])
            arr.rollback(cps[50])
            return arr

        arr = benchmark.pedantic(run, rounds=3 if n >= 100_000 else 5, iterations=1)
        assert len(arr) == n + 50 * step
    elif peer == "pure-python-deepcopy":

        def run_py() -> PyMessageArray:
            py = PyMessageArray()
            py.visible = [dict(m) for m in msgs]
            cps = []
            for i in range(100):
                cps.append(py.checkpoint_deep())
                for m in extra[i * step : (i + 1) * step]:
                    py.append(m)
            py.rollback(cps[50])
            return py

        py = benchmark.pedantic(run_py, rounds=1, iterations=1)
        assert len(py.visible) == n + 50 * step
    else:
        pytest.importorskip("langgraph")
        if n > 10_000:
            pytest.skip("LangGraph takes minutes per round at 100k (28 s at 10k); measured at 1k and 10k")
        from typing import Annotated, TypedDict

        from langchain_core.messages import convert_to_messages
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph
        from langgraph.graph.message import add_messages

        class State(TypedDict):
            messages: Annotated[list[Any], add_messages]

        g = StateGraph(State)
        g.add_node("noop", lambda s: {})
        g.add_edge(START, "noop")
        first = convert_to_messages(msgs)
        chunks = [convert_to_messages(extra[i * step : (i + 1) * step]) for i in range(100)]

        def run_lg() -> int:
            graph = g.compile(checkpointer=InMemorySaver())
            cfg = {"configurable": {"thread_id": "t"}}
            graph.invoke({"messages": first}, cfg)
            for c in chunks:
                graph.invoke({"messages": c}, cfg)
            history_ = list(graph.get_state_history(cfg))
            back = history_[len(history_) - 1 - 2 * 51]
            return len(back.values["messages"])

        assert benchmark.pedantic(run_lg, rounds=1, iterations=1) >= n


@pytest.mark.parametrize("n", SIZES, ids=label)
def test_bytes_per_message(benchmark: Any, n: int) -> None:
    """Not a timing: bytes held per message, memci (exact Rust heap) vs a list of dicts (tracemalloc)."""
    import tracemalloc

    benchmark.group = f"memory {label(n)}"
    msgs = list(history(n))
    before = memci._core.allocated_bytes()
    arr = memci.MessageArray(msgs)
    memci_bytes = memci._core.allocated_bytes() - before
    cps = []
    for _ in range(100):
        cps.append(arr.checkpoint())
        arr.append({"role": "user", "content": "one more"})
    snap_bytes = memci._core.allocated_bytes() - before - memci_bytes
    tracemalloc.start()
    copied = [copy_json(m) for m in msgs]
    py_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    benchmark.extra_info.update(
        memci_bytes_per_message=memci_bytes / n,
        list_of_dicts_bytes_per_message=py_bytes / n,
        snapshots_over_history=snap_bytes / memci_bytes,
    )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    assert len(copied) == len(arr) - 100
    if n >= 10_000:  # below that, the first chunks' doubling dominates
        assert memci_bytes < 0.6 * py_bytes
