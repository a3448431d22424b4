"""Print the bench results as Markdown: ``python benches/report.py bench-results/latest.json``.

For each workload, one table: a row per size with memci's median, each peer's median and its ratio
(peer / memci: above 1 means memci is faster), the design's target (docs/design.md) and whether it was met. Then the
memory figures. Works with whatever subset of the benches ran (``pytest benches -k ...``).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any

SIZE_ORDER = ("1k", "10k", "100k")
WORKLOAD_ORDER = (
    "build",
    "recent_user",
    "recent_system",
    "truncate",
    "filter",
    "snapshots",
    "checkpoint",
    "context_round",
    "context_build",
    "attp_parse",
    "sanitize_array",
    "validate_array",
    "validate_array_first",
    "sanitize_list",
    "validate_list",
    "count",
    "count_batch",
    "trim_approx",
    "trim_exact",
    "put_page",
    "get_page",
    "search",
    "search_build",
    "pg_save",
    "pg_load",
    "session_turn",
    "agent_trim",
    "graph_step",
    "memory_get",
)
PEER_ORDER = (
    "python",
    "python-indexed",
    "python-deep",
    "langchain",
    "langchain-convert",
    "llamaindex",
    "langgraph",
    "memci-sqlite",
    "python-window",
    "memci-cold",
    "tiktoken",
    "tiktoken-batch",
    "memci-normal",
    "memci-add",
    "directory",
    "memory",
    "sqlite-raw",
    "fts5",
    "memci-context",
    "agents",
)
TITLES = {
    "pg_save": "one turn saved into a conversation of n turns, on PostgreSQL (PostgresStorage)",
    "pg_load": "a conversation of n turns read back from PostgreSQL",
    "build": "Build a history, one append at a time",
    "recent_user": "1,000 x recent(3, role='user')",
    "recent_system": "1,000 x recent(1, role='system')",
    "truncate": "TRUNCATE keep_last (20% of n)",
    "filter": "FILTER roles user+assistant, content_excludes one keyword",
    "snapshots": "100 x (append 1% of n + snapshot), rollback to the 50th",
    "checkpoint": "100 snapshots of an unchanged history, rollback to the 50th",
    "context_round": "ContextSystem: one agent round (add, archive the oldest page, end_round, build_messages); "
    "size = archived pages",
    "context_build": "ContextSystem.build_messages with n=5 active pages and a full contents page",
    "attp_parse": "the TOML of one ATTP answer read (memci: the core's reader; tomllib.loads); size = its shape",
    "sanitize_array": "MessageArray.sanitize(), 1% of tool-call groups broken",
    "validate_array": "MessageArray.validate(), 1% of tool-call groups broken",
    "validate_array_first": "MessageArray.validate() on a store never scanned before",
    "sanitize_list": "sanitize_messages(list of dicts), 1% of tool-call groups broken",
    "validate_list": "validate_messages(list of dicts), 1% of tool-call groups broken",
    "count": "o200k_base token count of every text, one call per text",
    "count_batch": "o200k_base token count of every text, one batch call",
    "trim_approx": "trim to 20% of the tokens, approximate counter (system kept, start on user)",
    "trim_exact": "trim to 20% of the tokens, exact o200k_base counter (system kept, start on user)",
    "put_page": "100 x put_page into a store of n archived pages (SqliteStorage, synchronous=FULL)",
    "get_page": "1,000 x get_page of random pages from a store of n (SqliteStorage)",
    "search": "100 searches (1-3 words, some CJK), k=5 with snippets, over n pages (PageSearch, BM25)",
    "search_build": "index n page texts (PageSearch.extend)",
    "session_turn": "Agents SDK session: get_items() + add_items(2 items) on n items in a SQLite file",
    "agent_trim": "LangChain agent: the trim of one model call to 8,000 tokens, on n messages growing by a turn",
    "graph_step": "LangGraph prebuilt agent: one checkpointed turn on a thread of n messages (InMemorySaver)",
    "memory_get": "LlamaIndex memory: put(user message) + get() within 8,000 tokens, on n messages",
}


@dataclass(frozen=True)
class Target:
    """memci must be ``ratio`` times faster than the fastest of ``against`` (those that ran),
    at the sizes in ``sizes`` (all sizes if None)."""

    ratio: float
    against: tuple[str, ...]
    sizes: tuple[str, ...] | None
    text: str


TARGETS = {
    "build": Target(10, ("python",), None, ">=10x pure Python"),
    "recent_user": Target(1, ("python",), None, ">=1x the backwards scan"),
    "recent_system": Target(100, ("python",), ("100k",), ">=100x the backwards scan at 100k"),
    "truncate": Target(100, ("langchain",), ("100k",), ">=100x the O(n) peer (LangChain) at 100k"),
    "filter": Target(10, ("python",), None, ">=10x pure Python"),
    "snapshots": Target(100, ("python-deep", "langgraph"), ("100k",), ">=100x deep copy / LangGraph at 100k"),
    "checkpoint": Target(100, ("python", "python-deep"), ("100k",), ">=100x the best peer at 100k"),
    "sanitize_array": Target(20, ("python",), ("100k",), ">=20x pure Python at 100k"),
    "validate_array": Target(20, ("python",), ("100k",), ">=20x pure Python at 100k"),
    "validate_array_first": Target(10, ("python",), ("100k",), ">=10x pure Python at 100k (docs/design.md)"),
    "sanitize_list": Target(3, ("python",), ("100k",), ">=3x pure Python at 100k"),
    "validate_list": Target(3, ("python",), ("100k",), ">=3x pure Python at 100k"),
    "count": Target(1, ("tiktoken",), None, ">=1x tiktoken on one core"),
    "count_batch": Target(2, ("tiktoken",), None, ">=2x tiktoken's one-core loop (2 cores)"),
    "trim_approx": Target(50, ("langchain",), ("100k",), ">=50x LangChain trim_messages at 100k"),
    "trim_exact": Target(50, ("langchain",), ("100k",), ">=50x LangChain trim_messages at 100k"),
}
NOTES = [
    "Ratios are peer median / memci median: above 1x memci is faster. A target is checked against "
    "the fastest of the peers it names that ran; other peers are shown for scale.",
    "build: `langchain` and `llamaindex` store the caller's (pre-converted) objects without copying or "
    "validating; `langchain-convert` converts each dict as it arrives.",
    "recent_*: `python-indexed` answers from per-role index lists (O(k), like memci); docs/design.md's "
    "targets name the backwards scan.",
    "truncate: no target of its own in docs/design.md; the 100x rule for O(k) against O(n) is applied to "
    "LangChain's `trim_messages` (the pure-Python slice is O(k) too).",
    "snapshots: the appends (the same for every store) dominate the shallow-copy peer's time; "
    "`checkpoint` isolates the snapshots.",
    "context_*: no peer pages by user interaction with a contents page and recall rules, and docs/design.md "
    "sets no target: figures are absolute (rounds per second = 1 / median). `llamaindex` (a ChatMemoryBuffer "
    "trimmed by get() each round) and `python-window` (a bare sliding window of 5 interactions) do less "
    "than memci and are shown for scale; `memci-sqlite` is memci with pages written to SqliteStorage.",
    "sanitize/validate: the peer is `benches/pure_sanitize.py` (same rules, same report); "
    "`validate_array_first` scans a store whose pair index is not built yet; the `_list` entry points "
    "must look at every dict, which bounds them.",
    "trim_*: `memci` reuses the counts cached by earlier rounds (the agent-loop case); `memci-cold` "
    "counts in the round, on a new array each time.",
    "put_page/get_page/search: sizes count archived pages, not messages; no target in docs/design.md. "
    "`memci-normal` is SqliteStorage with synchronous=NORMAL; `directory` and `memory` are memci's other "
    "stores; `sqlite-raw` is json.dumps + one INSERT with no checks; `python` is the same BM25 in pure "
    "Python (same hits and scores); `fts5` is SQLite FTS5's bm25() with its own tokenizer.",
    "Peers missing from a table were skipped (not installed, or too slow for the run: see benches/conftest.py).",
]
MEMORY_TARGET = 0.6


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return f"{ratio:.3g}x" if ratio < 1000 else f"{ratio:,.0f}x"


def fmt_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def describe(bench: dict[str, Any]) -> tuple[str, str, str] | None:
    """(workload, peer, size) from extra_info, or from a name like ``test_build[memci-100k]``."""
    info = bench.get("extra_info") or {}
    if {"workload", "peer", "size"} <= info.keys():
        return info["workload"], info["peer"], info["size"]
    match = re.fullmatch(r"test_(\w+)\[(.+)-(\d+k)\]", bench.get("name", ""))
    return (match.group(1), match.group(2), match.group(3)) if match else None


#: Records a bench reads back as sizes, not times: extra_info by (size, peer).
Sizes = dict[tuple[str, str], dict[str, Any]]


def load(path: str) -> tuple[dict[tuple[str, str], dict[str, float]], Sizes, Sizes]:
    """Medians by (workload, size) then peer; the memory and page_bytes records' extra_info."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    times: dict[tuple[str, str], dict[str, float]] = {}
    memory: Sizes = {}
    page_bytes: Sizes = {}
    for bench in data.get("benchmarks", []):
        key = describe(bench)
        if key is None:
            continue
        workload, peer, size = key
        if workload == "memory":
            memory[size, peer] = bench.get("extra_info") or {}
        elif workload == "page_bytes":
            page_bytes[size, peer] = bench.get("extra_info") or {}
        elif workload == "pg_turn_bytes":  # bytes, in extra_info: docs/benchmarks.md, "PostgreSQL"
            continue
        else:
            times.setdefault((workload, size), {})[peer] = bench["stats"]["median"]
    return times, memory, page_bytes


def _order(items: list[str], order: tuple[str, ...]) -> list[str]:
    return sorted(items, key=lambda x: (order.index(x) if x in order else len(order), x))


def verdict(workload: str, size: str, medians: dict[str, float]) -> tuple[str, str]:
    """(target text, verdict) for one row."""
    target = TARGETS.get(workload)
    if target is None:
        return "-", "-"
    if target.sizes is not None and size not in target.sizes:
        return target.text, "n/a at this size"
    memci = medians.get("memci")
    against = [medians[p] for p in target.against if p in medians]
    if memci is None or not against:
        return target.text, "not measured"
    ratio = min(against) / memci
    return target.text, f"{'met' if ratio >= target.ratio else 'MISSED'} ({fmt_ratio(ratio)})"


def workload_tables(times: dict[tuple[str, str], dict[str, float]]) -> list[str]:
    out: list[str] = []
    workloads = _order(sorted({w for w, _ in times}), WORKLOAD_ORDER)
    for workload in workloads:
        sizes = _order([s for w, s in times if w == workload], SIZE_ORDER)
        peers = _order(sorted({p for s in sizes for p in times[workload, s] if p != "memci"}), PEER_ORDER)
        out.append(f"### {workload}: {TITLES.get(workload, workload)}")
        out.append("")
        header = ["size", "memci", *[f"{p} (ratio)" for p in peers], "target", "verdict"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] * len(header)) + "|")
        for size in sizes:
            medians = times[workload, size]
            memci = medians.get("memci")
            cells = [size, fmt_time(memci)]
            for peer in peers:
                value = medians.get(peer)
                if value is None:
                    cells.append("-")
                else:
                    ratio = value / memci if memci else None
                    cells.append(f"{fmt_time(value)} ({fmt_ratio(ratio)})")
            cells.extend(verdict(workload, size, medians))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return out


def memory_table(memory: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    if not memory:
        return []
    out = [
        "### memory: bytes held per message, and 100 snapshots",
        "",
        "| size | text/msg | memci heap/msg | list heap/msg | memci/list | memci RSS/msg | list RSS/msg "
        "| RSS memci/list | target | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    snapshots = [
        "",
        "| size | memci: 100 snapshots | memci: 100 snapshots, 1% appended between | list: 100 shallow copies "
        "| list: 100 deep copies |",
        "|---|---|---|---|---|",
    ]
    for size in _order(sorted({s for s, _ in memory}), SIZE_ORDER):
        m, py = memory.get((size, "memci"), {}), memory.get((size, "list"), {})
        n = m.get("n") or py.get("n")
        if not n:
            continue
        text = (m.get("text_bytes") or py.get("text_bytes") or 0) / n
        m_heap, py_heap = m.get("heap_bytes"), py.get("heap_bytes")
        m_rss, py_rss = m.get("rss_bytes"), py.get("rss_bytes")
        ratio = m_heap / py_heap if m_heap and py_heap else None
        rss_ratio = m_rss / py_rss if m_rss and py_rss else None
        status = "not measured" if ratio is None else ("met" if ratio <= MEMORY_TARGET else "MISSED")
        out.append(
            f"| {size} | {text:.0f} B | {_per(m_heap, n)} | {_per(py_heap, n)} | {fmt_ratio(ratio)} "
            f"| {_per(m_rss, n)} | {_per(py_rss, n)} | {fmt_ratio(rss_ratio)} "
            f"| <={MEMORY_TARGET}x the list (heap) | {status} |"
        )
        snapshots.append(
            f"| {size} | {_relative(m.get('snapshot_bytes'), m_heap)} "
            f"| {_relative(m.get('snapshot_mixed_bytes'), m_heap)} "
            f"| {_relative(py.get('snapshot_shallow_bytes'), py_heap)} "
            f"| {_relative(py.get('snapshot_deep_bytes'), py_heap)} |"
        )
    return [
        *out,
        *snapshots,
        "",
        "Snapshot cells: bytes, and relative to the history they snapshot (memci's heap, or the list's). "
        "Heap: memci's Rust allocations (counting allocator), the list's `tracemalloc`; RSS: resident-set "
        "growth in a fresh process (noisier).",
        "",
    ]


def _per(value: float | None, n: int) -> str:
    return "-" if value is None else f"{value / n:.0f} B"


def _relative(value: float | None, history: float | None) -> str:
    if value is None:
        return "-"
    if not history:
        return fmt_bytes(value)
    return f"{fmt_bytes(value)} ({value / history:.3g}x)"


def page_bytes_table(records: Sizes) -> list[str]:
    """Bytes per archived page on disk (bench_storage.py's ``page_bytes``), by size and store."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for (size, peer), info in records.items():
        rows.setdefault(size, {})[peer] = info
    if not rows:
        return []
    out = [
        "### page_bytes: bytes on disk per archived page",
        "",
        "| pages | JSON of a page | SqliteStorage (x JSON) | DirectoryStorage files | DirectoryStorage disk blocks |",
        "|---|---|---|---|---|",
    ]
    for size in _order(list(rows), SIZE_ORDER):
        by = rows[size]
        payload = by.get("json", {}).get("bytes_per_page")
        sqlite = by.get("memci", {}).get("bytes_per_page")
        ratio = f" ({fmt_ratio(sqlite / payload)})" if sqlite and payload else ""
        directory = by.get("directory", {})
        out.append(
            f"| {size} | {fmt_bytes(payload)} | {fmt_bytes(sqlite)}{ratio} | "
            f"{fmt_bytes(directory.get('bytes_per_page'))} | {fmt_bytes(directory.get('disk_bytes_per_page'))} |"
        )
    return [*out, ""]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    times, memory, page_bytes = load(argv[0])
    lines = ["## memci benchmarks (medians)", ""]
    lines += workload_tables(times)
    lines += memory_table(memory)
    lines += page_bytes_table(page_bytes)
    if times:
        lines += ["Notes:", "", *[f"- {note}" for note in NOTES]]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
