"""Every import point of an optional dependency, with that dependency made unimportable: the error
is a MissingExtraError (a MemciError and a ModuleNotFoundError) that names the extra to install."""

from __future__ import annotations

import importlib
import json
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memci
import pytest
from memci._optional import needs_extra, requirements_of
from memci.batch import Pipeline, sanitize
from memci.cli.main import main

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def hide(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make ``package`` and every module under it unimportable, as if it were not installed (a
    ``None`` in ``sys.modules`` stops an import with ModuleNotFoundError), until the test ends."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")] + [package]:
        monkeypatch.setitem(sys.modules, name, None)


def assert_names_extra(error: BaseException, extra: str, missing: str) -> None:
    assert isinstance(error, memci.MissingExtraError)
    assert isinstance(error, memci.MemciError)
    assert isinstance(error, ModuleNotFoundError)
    assert error.extra == extra
    assert error.name is not None
    assert error.name.split(".")[0] == missing
    assert f"pip install 'memci[{extra}]'" in str(error)
    assert isinstance(error.__cause__, ModuleNotFoundError)


# (memci module, package hidden, the extra that brings it): each module imports the package at its top.
MODULES = [
    ("memci.integrations.langchain", "langchain", "langchain"),
    ("memci.integrations.langchain", "langchain_core", "langchain"),
    ("memci.integrations.langchain_messages", "langchain_core", "langchain"),
    ("memci.integrations.langgraph", "langgraph", "langgraph"),
    ("memci.integrations.langgraph", "langchain_core", "langgraph"),
    ("memci.integrations.llama_index", "llama_index", "llama-index"),
    ("memci.integrations.llama_index_memory", "llama_index", "llama-index"),
    ("memci.integrations.openai_agents", "agents", "openai-agents"),
]


@pytest.mark.parametrize(("module", "package", "extra"), MODULES)
def test_importing_an_integration_without_its_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, package: str, extra: str
) -> None:
    pytest.importorskip(module)  # the extra is installed here: the test hides it
    monkeypatch.delitem(sys.modules, module)
    hide(monkeypatch, package)
    with pytest.raises(memci.MissingExtraError) as caught:
        importlib.import_module(module)
    assert_names_extra(caught.value, extra, package)
    assert module in str(caught.value)


def open_async_sqlite(tmp_path: Path) -> Any:
    import asyncio

    return asyncio.run(memci.AsyncSqliteStorage(tmp_path / "store.db").open())


def run_ray(tmp_path: Path) -> Any:
    from memci.integrations.ray import run

    (tmp_path / "in.jsonl").write_text(json.dumps({"messages": []}) + "\n")
    return run(Pipeline([sanitize()]), tmp_path / "in.jsonl", tmp_path / "out.jsonl")


def map_with_ray(tmp_path: Path) -> Any:
    from memci.integrations.ray import BatchMapper

    return BatchMapper([sanitize()])({"messages": []})


def run_arrow_table(tmp_path: Path) -> Any:
    from memci.batch.arrow import run_table

    return run_table(Pipeline([sanitize()]), object())


def run_parquet(tmp_path: Path) -> Any:
    from memci.batch.arrow import run_parquet

    return run_parquet(Pipeline([sanitize()]), tmp_path / "in.parquet", tmp_path / "out.parquet")


# (what is called, package hidden, the extra that brings it): each imports the package when called.
CALLS: list[tuple[str, Callable[[Path], Any], str, str]] = [
    ("RedisStorage", lambda _: memci.RedisStorage("redis://127.0.0.1:1/0"), "redis", "redis"),
    ("AsyncRedisStorage", lambda _: memci.AsyncRedisStorage("redis://127.0.0.1:1/0"), "redis", "redis"),
    ("AsyncSqliteStorage", open_async_sqlite, "aiosqlite", "async"),
    (
        "to_langchain",
        lambda _: memci.formats.to_langchain([{"role": "user", "content": ""}]),
        "langchain_core",
        "langchain",
    ),
    ("from_langchain", lambda _: memci.formats.from_langchain([]), "langchain_core", "langchain"),
    ("run_table", run_arrow_table, "pyarrow", "arrow"),
    ("run_parquet", run_parquet, "pyarrow", "arrow"),
    ("ray.run", run_ray, "ray", "ray"),
    ("PostgresStorage", lambda _: memci.PostgresStorage("postgresql://127.0.0.1:1/x"), "psycopg", "postgres"),
    (
        "EncryptedStorage",
        lambda _: memci.EncryptedStorage(memci.MemoryStorage(), b"k" * 32),
        "cryptography",
        "encryption",
    ),
    ("ray.BatchMapper", map_with_ray, "pyarrow", "ray"),
]


@pytest.mark.parametrize(("call", "package", "extra"), [(c, p, e) for _, c, p, e in CALLS], ids=[n for n, *_ in CALLS])
def test_a_feature_without_its_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, call: Callable[[Path], Any], package: str, extra: str
) -> None:
    import memci.formats
    import memci.integrations.ray  # imported before the package is hidden: it needs it only when run

    hide(monkeypatch, package)
    with pytest.raises(memci.MissingExtraError) as caught:
        call(tmp_path)
    assert_names_extra(caught.value, extra, package)


def test_the_batch_command_on_ray_without_ray_says_which_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"messages": []}) + "\n")
    hide(monkeypatch, "ray")
    assert main(["batch", str(source), str(tmp_path / "out.jsonl"), "--ray", "local", "--quiet"]) == 2
    assert "memci batch --ray needs the 'ray' extra" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_an_extra_too_old_to_import_from_is_named_with_its_bounds() -> None:
    # What an old llama-index-core gives: the module is there, the name memci imports is not.
    with pytest.raises(memci.MissingExtraError) as caught, needs_extra("llama-index", "the adapter"):
        raise ImportError("cannot import name 'ToolCallBlock' from 'llama_index.core.base.llms.types'")
    message = str(caught.value)
    assert message.startswith("the adapter needs the 'llama-index' extra (llama-index-core>=")
    assert "cannot import name 'ToolCallBlock'" in message
    assert caught.value.extra == "llama-index"


def test_other_errors_pass_through_unchanged() -> None:
    with pytest.raises(KeyError), needs_extra("redis", "RedisStorage"):
        raise KeyError("not an import")


def test_the_bounds_named_are_the_extras_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    listed = [
        "numpy>=1.26",
        "ray[data]>=2.30 ; extra == 'ray'",
        'pyarrow>=14 ; extra == "ray"',
        'pyarrow>=14 ; extra == "arrow"',
        "llama-index-core>=0.14.12; extra == 'llama-index'",
    ]
    monkeypatch.setattr(metadata, "requires", lambda name: listed if name == "memci" else None)
    assert requirements_of("ray") == ["ray[data]>=2.30", "pyarrow>=14"]
    assert requirements_of("llama-index") == ["llama-index-core>=0.14.12"]
    assert requirements_of("llama") == []
    assert requirements_of("no-such-extra") == []


def test_the_installed_metadata_lists_every_extra() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    for extra in extras:
        assert requirements_of(extra), extra
