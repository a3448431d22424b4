"""Batch processing of a conversation dataset (``memci.batch``) against the peers a data team has.

The dataset: generated agent conversations (``generator.broken_conversation``: 1% of tool-call
groups broken) cut into conversations of 3-40 user turns, each with the system prompt, written as
JSONL (``{"id": i, "messages": [...]}`` per line). ``MEMCI_BATCH_MB`` sets its size (default 200
under ``--benchmark-enable``, 2 in the untimed pass of ``make test``); it is generated once and
cached in the temp dir.

Workloads:

- ``budget``: sanitize + keep the newest messages within 4,096 ``o200k_base`` tokens (tool groups
  whole, system prompt kept) + count the kept tokens;
- ``clean``: sanitize + drop messages containing a keyword (``password``), no token budget.

Peers, each from the JSONL file to a JSONL file, on the same 2 cores:

- ``memci-batch``: ``Pipeline(steps, workers=2).run_jsonl`` (Rust from bytes to bytes);
- ``python-pool``: the careful pure-Python pipeline in ``multiprocessing.Pool(2)``: ``json.loads``,
  the pure-Python sanitizer (``pure_sanitize``), a pure-Python trim counting each message it looks
  at with tiktoken (loaded offline), ``json.dumps``;
- ``memci-pool``: memci's per-conversation API in the same pool: ``json.loads``, ``MessageArray``,
  ``sanitize``/``filter``/``trim_to_tokens``/``token_count``, ``json.dumps(arr.messages())``;
- ``floor`` (budget only): the tokenizer floor, ``memci.tokens.count_batch`` over the texts of the
  kept messages alone (collected beforehand), on 2 cores.

``python benches/bench_batch.py`` (``make bench-batch-large``: on the 200 MB file) runs every peer
and floor in five interleaved rounds and prints the ratios of their best runs (medians beside) and
the CLI's peak memory (``ru_maxrss`` of a ``memci batch`` child
process) on the same file, with these floors beside them:

- ``io-floor`` (both workloads): the file read and written to a new file in 1 MiB blocks, unparsed,
  each block's place reserved before it is written (one core; the kernel's copies, what any run
  that writes its output pays);
- ``floor+io`` (budget): the sum of the two, the least a run that counts the kept text and writes
  its output could take without parsing anything;
- ``tiktoken-floor`` (budget): the same kept texts counted with tiktoken in the pool (2 cores),
  what the floor would be with the tokenizer the peers use;
- ``loads-floor`` (clean): ``json.loads`` of every line, nothing else (one core).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import generator
import memci
import pure_sanitize
import pytest
from bench_tokens import tiktoken_encoding
from memci import batch, tokens

Message = dict[str, Any]
BUDGET = 4096
KEYWORD = "password"
WORKERS = 2
#: Lines a pool task takes at a time.
POOL_CHUNK = 64
MB_ENV = "MEMCI_BATCH_MB"

STEPS: dict[str, list[batch.Step]] = {
    "budget": [batch.sanitize(), batch.trim_to_tokens(BUDGET), batch.count_tokens()],
    "clean": [batch.sanitize(), batch.filter(content_excludes=[KEYWORD])],
}


def dataset_mb(enabled: bool) -> int:
    return int(os.environ.get(MB_ENV, "200" if enabled else "2"))


def _conversations(target_bytes: int) -> Iterator[list[Message]]:
    rng = random.Random(14)
    written, seed = 0, 1
    while written < target_bytes:
        history = generator.broken_conversation(100_000, seed=seed)
        system, rest = history[0], history[1:]
        turns: list[list[Message]] = []
        for m in rest:
            if m["role"] == "user" or not turns:
                turns.append([])
            turns[-1].append(m)
        at = 0
        while at < len(turns) and written < target_bytes:
            k = rng.randint(3, 40)
            conversation = [system] + [m for turn in turns[at : at + k] for m in turn]
            at += k
            written += sum(len(m.get("content") or "") for m in conversation)
            yield conversation
        seed += 1


@cache
def dataset(mb: int) -> Path:
    """The JSONL dataset of about ``mb`` MB, generated once into the temp dir."""
    path = Path(tempfile.gettempdir()) / f"memci-bench-batch-{mb}mb-v1.jsonl"
    if not path.exists():
        temp = path.with_suffix(f".partial-{os.getpid()}")
        with temp.open("w", encoding="utf-8") as f:
            size = 0
            for i, conversation in enumerate(_conversations(mb * 700_000)):
                line = json.dumps({"id": i, "messages": conversation}, ensure_ascii=False) + "\n"
                f.write(line)
                size += len(line)
                if size >= mb * 1_000_000:
                    break
        os.replace(temp, path)
    return path


# ---- the pure-Python pipeline ----------------------------------------------------------------------

#: tiktoken's encoder, loaded in each pool worker when it starts (a holder, not a global rebound).
_ENCODER: list[Callable[[str], list[int]]] = []


def _encode(text: str) -> list[int]:
    return _ENCODER[0](text)


def _tokens(m: Message) -> int:
    """The chat format's count of one message (memci's rules: 3 per message, the texts, a name and
    each tool call's name and arguments plus one)."""
    n = 3
    content = m.get("content")
    if isinstance(content, str):
        n += len(_encode(content))
    n += len(_encode(m["role"]))
    if "name" in m:
        n += len(_encode(m["name"])) + 1
    for call in m.get("tool_calls") or ():
        fn = call["function"]
        n += len(_encode(fn["name"])) + len(_encode(fn["arguments"])) + 1
    return n


def _py_trim(messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """Keep the leading system messages and the newest units (an assistant message with tool calls
    and its results are one unit) that fit; start on a user message. Counts only what it looks at."""
    s = 0
    while s < len(messages) and messages[s]["role"] in ("system", "developer"):
        s += 1
    head = sum(_tokens(m) for m in messages[:s])
    room = budget - head - 3
    start = len(messages)
    costs: list[int] = []
    while start > s:
        first = start - 1
        if messages[first]["role"] == "tool":
            run = first
            while run > s and messages[run - 1]["role"] == "tool":
                run -= 1
            if run > s and messages[run - 1]["role"] == "assistant" and messages[run - 1].get("tool_calls"):
                first = run - 1
        unit = [_tokens(m) for m in messages[first:start]]
        cost = sum(unit)
        if cost > room:
            break
        room -= cost
        costs[:0] = unit
        start = first
    while start < len(messages) and messages[start]["role"] != "user":
        costs.pop(0)
        start += 1
    kept = messages[:s] + messages[start:]
    total = head + sum(costs) + 3 if kept else 0
    return kept, total


def _mentions(m: Message, keyword: str) -> bool:
    """Whether a message's text (memci's rule: its content, then its tool calls' names and
    arguments) contains ``keyword``."""
    content = m.get("content")
    if isinstance(content, str) and keyword in content:
        return True
    return any(
        keyword in c["function"]["name"] or keyword in c["function"]["arguments"] for c in m.get("tool_calls") or ()
    )


def _py_lines(workload: str, lines: list[str]) -> tuple[list[str], int]:
    out, tokens_total = [], 0
    for line in lines:
        record = json.loads(line)
        messages, _ = pure_sanitize.sanitize_messages(record["messages"])
        if workload == "budget":
            messages, n = _py_trim(messages, BUDGET)
            tokens_total += n
        else:
            messages = [m for m in messages if not _mentions(m, KEYWORD)]
        record["messages"] = messages
        out.append(json.dumps(record, ensure_ascii=False))
    return out, tokens_total


def _memci_lines(workload: str, lines: list[str]) -> tuple[list[str], int]:
    out, tokens_total = [], 0
    for line in lines:
        record = json.loads(line)
        arr = memci.MessageArray(record["messages"])
        arr.sanitize()
        if workload == "budget":
            arr.trim_to_tokens(BUDGET)
            tokens_total += arr.token_count()
        else:
            arr.filter(content_excludes=[KEYWORD])
        record["messages"] = arr.messages()
        out.append(json.dumps(record, ensure_ascii=False))
    return out, tokens_total


def _task(args: tuple[str, str, list[str]]) -> tuple[list[str], int, float]:
    """A chunk of lines through one peer; also the CPU seconds the worker spent on it."""
    peer, workload, lines = args
    cpu = time.process_time()
    out, total = (_py_lines if peer == "python-pool" else _memci_lines)(workload, lines)
    return out, total, time.process_time() - cpu


def _chunks(path: Path) -> Iterator[list[str]]:
    chunk: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            chunk.append(line)
            if len(chunk) == POOL_CHUNK:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


#: CPU seconds the pool workers spent in the last :func:`run_pool`.
WORKER_CPU: list[float] = [0.0]


def run_pool(pool: Any, peer: str, workload: str, source: Path, target: Path) -> int:
    total, WORKER_CPU[0] = 0, 0.0
    with target.open("w", encoding="utf-8") as f:
        for lines, n, cpu in pool.imap(_task, ((peer, workload, c) for c in _chunks(source))):
            f.writelines(x + "\n" for x in lines)
            total += n
            WORKER_CPU[0] += cpu
    return total


def run_memci(workload: str, source: Path, target: Path) -> int:
    summary = batch.Pipeline(STEPS[workload], workers=WORKERS).run_jsonl(source, target)
    return summary.tokens[-1] if summary.tokens else 0


def kept_texts(path: Path) -> list[str]:
    """Every text the count of the kept messages tokenizes (contents, tool names and arguments)."""
    texts: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            for m in json.loads(line)["messages"]:
                if isinstance(m.get("content"), str):
                    texts.append(m["content"])
                for call in m.get("tool_calls") or ():
                    texts += [call["function"]["name"], call["function"]["arguments"]]
    return texts


def copy_blocks(source: Path, target: Path) -> None:
    """The I/O floor: the file read and written to ``target`` in 1 MiB blocks, unparsed (one core).
    Each block's place in ``target`` is reserved before it is written (``posix_fallocate``, as
    memci's JSONL runs reserve each chunk's output): on ext4 that skips the per-page bookkeeping of
    delayed allocation, a fifth of the copy's kernel time."""
    block = bytearray(1 << 20)
    at = 0
    with source.open("rb", buffering=0) as f, target.open("wb", buffering=0) as g:
        while n := f.readinto(block):
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(g.fileno(), at, n)
            g.write(memoryview(block)[:n])
            at += n


def parse_lines(source: Path) -> None:
    """The parse floor of a clean run: ``json.loads`` of every line, nothing else (one core)."""
    with source.open("rb") as f:
        for line in f:
            json.loads(line)


def _tiktoken_count(texts: list[str]) -> tuple[int, float]:
    """A pool task: the tokens of ``texts`` by tiktoken, and the worker's CPU seconds."""
    cpu = time.process_time()
    n = sum(len(_encode(t)) for t in texts)
    return n, time.process_time() - cpu


def tiktoken_floor(pool: Any, texts: list[str]) -> int:
    """The tokenizer floor with tiktoken: ``texts`` counted in the pool, in slices of 2,000."""
    total, WORKER_CPU[0] = 0, 0.0
    for n, cpu in pool.imap(_tiktoken_count, (texts[i : i + 2000] for i in range(0, len(texts), 2000))):
        total += n
        WORKER_CPU[0] += cpu
    return total


def _start_worker() -> None:
    """A pool worker: tiktoken loaded (offline), and no log line per sanitized conversation
    (neither peer logs in a batch job)."""
    for name in ("memci", "pure_sanitize"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if not _ENCODER:
        _ENCODER.append(tiktoken_encoding().encode_ordinary)


@cache
def pool() -> Any:
    """``multiprocessing.Pool(2)``, spawned (a forked child would inherit thread pools without
    their threads)."""
    tiktoken_encoding()  # skips the case here, in the parent, when tiktoken is missing
    started = multiprocessing.get_context("spawn").Pool(WORKERS, initializer=_start_worker)
    # Wait until every worker has started (imports, tiktoken loaded): their start-up must not run
    # beside a timed case.
    started.map(abs, range(WORKERS * 4), chunksize=1)
    return started


# ---- pytest cases ----------------------------------------------------------------------------------

PEERS = {
    "budget": ["memci-batch", "python-pool", "memci-pool", "floor"],
    "clean": ["memci-batch", "python-pool", "memci-pool"],
}


@pytest.fixture(scope="module")
def shared_pool() -> Iterator[Any]:
    """The pool of the pool peers, closed after this file's cases."""
    started = pool()
    yield started
    started.terminate()
    started.join()
    pool.cache_clear()


@pytest.mark.parametrize(("workload", "peer"), [(w, p) for w, peers in PEERS.items() for p in peers])
def test_batch(benchmark: Any, shared_pool: Any, tmp_path: Path, workload: str, peer: str) -> None:
    mb = dataset_mb(benchmark.enabled)
    source = dataset(mb)
    benchmark.group = f"batch-{workload}-{mb}MB"
    benchmark.extra_info.update(workload=f"batch-{workload}", peer=peer, size=f"{mb}MB")
    target = tmp_path / "out.jsonl"
    if peer == "floor":
        run_memci(workload, source, target)
        texts = kept_texts(target)
        counted = benchmark.pedantic(tokens.count_batch, args=(texts,), rounds=3 if benchmark.enabled else 1)
        assert sum(counted) > 0
        return
    if peer == "memci-batch":

        def fresh_target() -> tuple[tuple[str, Path, Path], dict[str, Any]]:
            target.unlink(missing_ok=True)  # each round writes a new file, as a first run does
            return (workload, source, target), {}

        got = benchmark.pedantic(run_memci, setup=fresh_target, rounds=3 if benchmark.enabled else 1)
    else:
        got = benchmark.pedantic(run_pool, args=(shared_pool, peer, workload, source, target), rounds=1)
    lines = target.read_text(encoding="utf-8").splitlines()
    with source.open(encoding="utf-8") as f:
        records = f.read().splitlines()
    assert len(lines) == len(records)
    if workload == "budget":
        assert got > 0
    # Every peer removes the same broken groups: the outputs agree with memci's on the first records.
    first = json.loads(lines[0])["messages"]
    reference = memci.MessageArray(json.loads(records[0])["messages"])
    reference.sanitize()
    if workload == "clean":
        reference.filter(content_excludes=[KEYWORD])
        assert first == reference.messages()


# ---- one run of everything, with ratios --------------------------------------------------------------


#: Timed runs of each peer and floor in ``main``.
ROUNDS = 5


def _run(fn: Callable[[], Any], output: Path | None) -> tuple[float, float]:
    """One timed run: wall time and CPU time (this process's threads plus the pool workers'). It
    writes its ``output`` as a new file (the one before is deleted untimed: freeing its pages is
    not the run's work) and starts after a sync (the write-back of the runs before is not done
    beside it)."""
    if output is not None:
        output.unlink(missing_ok=True)
    os.sync()
    WORKER_CPU[0] = 0.0
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu + WORKER_CPU[0]


def _time_all(runs: dict[str, tuple[Callable[[], Any], Path | None]]) -> dict[str, list[tuple[float, float]]]:
    """``ROUNDS`` timed runs of every entry, in rounds (each round runs every entry once), so
    that every peer meets the shared machine's quiet and busy spells alike; each entry's runs,
    sorted by wall time."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, (fn, output) in runs.items():
            times[name].append(_run(fn, output))
    return {name: sorted(t) for name, t in times.items()}


def main() -> None:
    """Every peer and floor of both workloads, run in interleaved rounds. Ratios are of the best
    runs (the least disturbed ones: a 0.1 s run disturbed once in a few runs doubled, measured);
    the median wall time is printed beside them to show the spread. The outputs (about four times
    the dataset) are removed at the end."""
    mb = dataset_mb(True)
    source = dataset(mb)
    print(f"dataset: {source} ({source.stat().st_size / 1e6:.1f} MB), best of {ROUNDS} interleaved runs")
    out = Path(tempfile.mkdtemp(prefix="memci-bench-batch-"))
    try:
        for workload in ("budget", "clean"):
            _report(workload, _time_all(_runs(workload, source, out)))
        _report_cli_memory(source, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _runs(workload: str, source: Path, out: Path) -> dict[str, tuple[Callable[[], Any], Path | None]]:
    """What ``main`` times for ``workload``: the peers and the floors, writing into ``out``."""
    p = pool()
    memci_out, py_out, mp_out, copy_out = out / "memci.jsonl", out / "py.jsonl", out / "mp.jsonl", out / "copy.jsonl"
    runs: dict[str, tuple[Callable[[], Any], Path | None]] = {
        "memci-batch": (lambda: run_memci(workload, source, memci_out), memci_out),
        "python-pool": (lambda: run_pool(p, "python-pool", workload, source, py_out), py_out),
        "memci-pool": (lambda: run_pool(p, "memci-pool", workload, source, mp_out), mp_out),
        "io-floor": (lambda: copy_blocks(source, copy_out), copy_out),
    }
    if workload == "budget":
        run_memci(workload, source, memci_out)
        texts = kept_texts(memci_out)
        runs["floor"] = (lambda: tokens.count_batch(texts), None)
        runs["tiktoken-floor"] = (lambda: tiktoken_floor(p, texts), None)
    else:
        runs["loads-floor"] = (lambda: parse_lines(source), None)
    return runs


def _report(workload: str, times: dict[str, list[tuple[float, float]]]) -> None:
    best = {name: t[0] for name, t in times.items()}
    median = {name: t[len(t) // 2][0] for name, t in times.items()}
    if workload == "budget":
        (fw, fc), (iw, ic) = best["floor"], best["io-floor"]
        best["floor+io"] = (fw + iw, fc + ic)
        median["floor+io"] = median["floor"] + median["io-floor"]
    wall, cpu = best["memci-batch"]
    for peer, (w, c) in best.items():
        print(
            f"{workload:>7} {peer:>14} wall {w:7.3f} s ({w / wall:5.2f}x)   cpu {c:7.3f} s ({c / cpu:5.2f}x)"
            f"   median wall {median[peer]:7.3f} s ({median[peer] / median['memci-batch']:5.2f}x)"
        )


def _report_cli_memory(source: Path, out: Path) -> None:
    """The peak RSS of ``memci batch`` on the budget workload, in a child process."""
    cli = [sys.executable, "-m", "memci", "batch", str(source), str(out / "cli.jsonl"), "--sanitize", "--max-tokens"]
    cli += [str(BUDGET), "--keep-system", "--workers", str(WORKERS), "--quiet"]
    # A fresh parent whose only child is the CLI: its RUSAGE_CHILDREN peak is the CLI's own.
    probe = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
    probe += "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    peak = int(subprocess.run([sys.executable, "-c", probe, *cli], capture_output=True, text=True, check=True).stdout)
    print(f"CLI peak RSS: {peak / 1024:.0f} MB (target: under 300 MB)")


if __name__ == "__main__":
    main()
