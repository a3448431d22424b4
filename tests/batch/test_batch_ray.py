"""The pipeline on a local Ray (started here, shut down after): map_batches with BatchMapper on
Arrow and pandas batches, and the JSONL and Parquet runs of memci.integrations.ray, all equal to
the iterable path; their output goes where it points (a symlink's file, a FIFO, never a directory)
and an input changed under the run (from the progress callback: at a point of the run, not a time)
is an error with nothing renamed into place."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import CHANGES, PIPELINES, RECORD, fifo_reader, reference
from memci import batch
from memci.errors import StorageError
from tool_histories import ANTHROPIC, OPENAI

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from memci.integrations.ray import BatchMapper, run  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore")]

STEPS = PIPELINES["sanitize_trim_count"]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def dataset(n: int) -> list[list[dict[str, Any]]]:
    out = []
    for i in range(n):
        fmt = OPENAI if i % 2 else ANTHROPIC
        conversation = [fmt.system(), fmt.user(f"q{i} " * (i % 9)), fmt.calls(f"c{i}")]
        if i % 4:
            conversation += fmt.results(f"c{i}")
        out.append([*conversation, fmt.reply("done " * (i % 5))])
    return out


def expected(data: list[Any]) -> list[Any]:
    return [reference(c, STEPS)[0] for c in data]


@pytest.mark.usefixtures("local_ray")
@pytest.mark.parametrize("batch_format", ["pyarrow", "pandas"])
def test_map_batches_matches_the_local_pipeline(batch_format: str) -> None:
    data = dataset(40)
    ds = ray.data.from_items([{"id": i, "messages": json.dumps(c)} for i, c in enumerate(data)])
    out = ds.map_batches(BatchMapper(STEPS), batch_format=batch_format, batch_size=7).take_all()
    got = {row["id"]: json.loads(row["messages"]) for row in out}
    assert [got[i] for i in range(len(data))] == expected(data)


@pytest.mark.usefixtures("local_ray")
def test_jsonl_and_parquet_runs_on_ray(tmp_path: Path) -> None:
    data = dataset(30)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(c) + "\n" for c in data), encoding="utf-8")
    target = tmp_path / "out.jsonl"
    summary = run(batch.Pipeline(STEPS), source, target)
    assert summary.conversations == len(data)
    assert [json.loads(x) for x in target.read_text(encoding="utf-8").splitlines()] == expected(data)
    parquet_in, parquet_out = tmp_path / "in.parquet", tmp_path / "out"
    pq.write_table(pa.table({"id": list(range(30)), "messages": [json.dumps(c) for c in data]}), parquet_in)
    run(batch.Pipeline(STEPS), parquet_in, parquet_out)
    table = pq.read_table(parquet_out).sort_by("id")
    assert [json.loads(x) for x in table.column("messages").to_pylist()] == expected(data)


@pytest.mark.usefixtures("local_ray")
def test_map_batches_reads_responses_items() -> None:
    data = []
    for i in range(20):
        call = {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": f"c{i}", "output": "r " * i}
        items = [{"role": "user", "content": f"q{i}"}, call] + ([output] if i % 3 else [])
        data.append([*items, {"role": "assistant", "content": "done"}])
    ds = ray.data.from_items([{"id": i, "messages": json.dumps(c)} for i, c in enumerate(data)])
    out = ds.map_batches(BatchMapper(STEPS, format="responses"), batch_format="pyarrow", batch_size=6).take_all()
    got = {row["id"]: json.loads(row["messages"]) for row in out}
    assert [got[i] for i in range(len(data))] == expected(data)
    assert any(len(got[i]) < len(data[i]) for i in range(len(data)))


def damaged_lines(data: list[list[dict[str, Any]]]) -> list[str]:
    """The dataset as JSONL with bad records and blank lines among the good ones."""
    lines = [json.dumps({"id": i, "messages": c}) for i, c in enumerate(data)]
    lines.insert(3, '{"id": "broken", "messages": [{"role": "user"')  # not JSON
    lines.insert(7, "")
    lines.insert(9, json.dumps({"id": "robot", "messages": [{"role": "robot", "content": "x"}]}))
    lines.insert(12, "   ")
    lines.insert(15, json.dumps({"id": "nolist"}))
    return lines


#: Not compared: times and byte counts differ by nature.
UNCOMPARED = {"seconds", "bytes_in", "bytes_out"}


def comparable(summary: batch.BatchSummary) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(summary).items() if k not in UNCOMPARED}


@pytest.mark.usefixtures("local_ray")
def test_a_jsonl_run_on_ray_reports_what_the_local_run_reports(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(damaged_lines(dataset(24))) + "\n", encoding="utf-8")
    local = batch.Pipeline(STEPS).run_jsonl(source, tmp_path / "local.jsonl", errors=tmp_path / "local.errors")
    on_ray = run(batch.Pipeline(STEPS), source, tmp_path / "ray.jsonl", errors=tmp_path / "ray.errors")
    assert local.bad == 3
    assert local.conversations == 24
    assert local.blank == 2
    assert comparable(on_ray) == comparable(local)
    assert on_ray.records == on_ray.conversations + on_ray.bad + on_ray.blank
    assert (tmp_path / "ray.jsonl").read_text("utf-8") == (tmp_path / "local.jsonl").read_text("utf-8")
    assert (tmp_path / "ray.errors").read_bytes() == (tmp_path / "local.errors").read_bytes()
    errors = [json.loads(x) for x in (tmp_path / "ray.errors").read_text("utf-8").splitlines()]
    assert [e["line"] for e in errors] == [4, 10, 16]
    assert errors[1]["path"] == "messages[0].role"


@pytest.mark.usefixtures("local_ray")
def test_a_jsonl_run_on_ray_splits_lines_where_the_local_run_does(tmp_path: Path) -> None:
    """Lines end at a newline only: the Unicode line ends JSON allows raw inside a string stay in
    their record, a line's trailing carriage returns go, and a line that is not UTF-8, or holds
    only non-ASCII spaces, is one bad record, as in the local run."""
    good = [
        json.dumps([{"role": "user", "content": f"one{end}two"}], ensure_ascii=False)
        for end in ("\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c")
    ]
    lines = [
        *(x.encode() for x in good),
        RECORD.encode() + b"\r",
        b"\xff" + RECORD.encode(),
        "\u00a0\u3000".encode(),
        b"\r",
    ]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(lines))  # no newline after the last line
    local = batch.Pipeline(STEPS).run_jsonl(source, tmp_path / "local.jsonl", errors=tmp_path / "local.errors")
    on_ray = run(batch.Pipeline(STEPS), source, tmp_path / "ray.jsonl", errors=tmp_path / "ray.errors")
    assert (local.conversations, local.bad, local.blank) == (7, 2, 1)
    assert comparable(on_ray) == comparable(local)
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert (tmp_path / "ray.errors").read_bytes() == (tmp_path / "local.errors").read_bytes()
    assert [json.loads(x)["line"] for x in (tmp_path / "ray.errors").read_bytes().splitlines()] == [8, 9]
    kept = [json.loads(x) for x in (tmp_path / "ray.jsonl").read_bytes().split(b"\n") if x]
    assert [m[0]["content"] for m in kept[:6]] == [
        f"one{end}two" for end in ("\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c")
    ]


@pytest.mark.usefixtures("local_ray")
def test_a_parquet_run_on_ray_reports_bad_rows_and_keeps_the_schema(tmp_path: Path) -> None:
    texts = [x for x in damaged_lines(dataset(20)) if x.strip()]
    source, target = tmp_path / "in.parquet", tmp_path / "out"
    pq.write_table(pa.table({"row": list(range(len(texts))), "messages": texts}), source)
    local = batch.Pipeline(STEPS)
    from memci.batch.arrow import run_parquet

    expected = run_parquet(local, source, tmp_path / "local.parquet", errors=tmp_path / "local.errors")
    on_ray = run(batch.Pipeline(STEPS), source, target, errors=tmp_path / "ray.errors")
    assert expected.bad == 3
    assert comparable(on_ray) == comparable(expected)
    got = pq.read_table(target).sort_by("row")
    assert got.schema == pq.read_table(tmp_path / "local.parquet").schema
    assert got.to_pylist() == pq.read_table(tmp_path / "local.parquet").to_pylist()
    errors = (tmp_path / "ray.errors").read_text("utf-8")
    assert errors == (tmp_path / "local.errors").read_text("utf-8")
    assert [json.loads(x)["row"] for x in errors.splitlines()] == [3, 8, 13]


def test_a_reporting_mapper_returns_every_row_and_the_batch_totals() -> None:
    rows = [json.dumps(c) for c in dataset(6)] + ['[{"role": "user"}]']
    table = pa.table({"messages": rows})
    out = BatchMapper(STEPS, report=True)(table)
    assert out.num_rows == 7
    assert out.column("messages").to_pylist()[-1] is None
    assert json.loads(out.column("memci_error").to_pylist()[-1])["path"] == "[0].content"
    totals = [t for t in out.column("memci_totals").to_pylist() if t is not None]
    assert len(totals) == 1
    assert json.loads(totals[0])["conversations"] == 6
    assert json.loads(totals[0])["bad"] == 1
    assert BatchMapper(STEPS)(table).num_rows == 6  # without report: bad rows dropped, schema kept


def partials(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name)


@pytest.mark.usefixtures("local_ray")
def test_a_ray_run_writes_through_a_symlink_and_into_a_fifo(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(damaged_lines(dataset(12))) + "\n", encoding="utf-8")
    local = batch.Pipeline(STEPS).run_jsonl(source, tmp_path / "local.jsonl", errors=tmp_path / "local.errors")
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("old\n")
    link.symlink_to(real.name)
    with fifo_reader(tmp_path / "errors.fifo") as got:
        on_ray = run(batch.Pipeline(STEPS), source, link, errors=tmp_path / "errors.fifo")
    assert comparable(on_ray) == comparable(local)
    assert link.is_symlink()
    assert real.read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert (tmp_path / "errors.fifo").is_fifo()
    expected_errors = (tmp_path / "local.errors").read_text("utf-8").splitlines()
    assert [json.loads(x) for x in got[0].decode().splitlines()] == [json.loads(x) for x in expected_errors]
    assert len(expected_errors) == 3
    assert partials(tmp_path) == []


@pytest.mark.usefixtures("local_ray")
def test_a_ray_run_refuses_a_directory_and_leaves_no_partial_file(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(damaged_lines(dataset(6))) + "\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    with pytest.raises(IsADirectoryError):
        run(batch.Pipeline(STEPS), source, tmp_path / "out", errors=tmp_path / "errors.jsonl")
    assert list((tmp_path / "out").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out"]


@pytest.mark.usefixtures("local_ray")
@pytest.mark.parametrize("name", CHANGES)
def test_an_input_changed_under_a_ray_run_is_an_error_and_nothing_is_renamed(tmp_path: Path, name: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text((RECORD + "\n") * 600, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    out.write_text("the previous output\n")
    calls: list[tuple[int, int, int]] = []

    def progress(read: int, total: int, records: int) -> None:
        if not calls:
            CHANGES[name](source)
        calls.append((read, total, records))

    with pytest.raises(StorageError, match="changed while the run read it") as raised:
        run(batch.Pipeline(STEPS), source, out, errors=tmp_path / "errors.jsonl", progress=progress)
    assert raised.value.where == str(source)
    assert calls
    assert out.read_text() == "the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


@pytest.mark.usefixtures("local_ray")
def test_a_parquet_input_changed_under_a_ray_run_writes_no_folder(tmp_path: Path) -> None:
    source, target = tmp_path / "in.parquet", tmp_path / "out"
    pq.write_table(pa.table({"messages": [json.dumps(c) for c in dataset(10)]}), source)

    def progress(read: int, total: int, records: int) -> None:
        CHANGES["replaced"](source)

    with pytest.raises(StorageError, match="changed while the run read it"):
        run(batch.Pipeline(STEPS), source, target, errors=tmp_path / "errors.jsonl", progress=progress)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
