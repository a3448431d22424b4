"""``import memci`` is light: numpy, rich and the optional packages load only where they are used;
the ``memci`` logger leaves output to the program. Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Packages ``import memci`` must not load: numpy serves ``MessageArray.indices`` alone, rich the
#: command line alone; the others are optional extras and test peers.
HEAVY = (
    "numpy",
    "rich",
    "redis",
    "langchain_core",
    "tiktoken",
    "openai",
    "anthropic",
    "agents",
    "llama_index",
    "langgraph",
    "langchain",
)


def run(code: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done


def loaded_after(code: str) -> set[str]:
    """The modules loaded once ``code`` has run in a fresh interpreter."""
    done = run(f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))")
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_import_memci_loads_the_core_but_no_wing_and_no_heavy_or_optional_package() -> None:
    loaded = loaded_after("import memci")
    assert {"memci.array", "memci.ops", "memci.sanitize", "memci.tokens", "memci.usage"} <= loaded
    lazy = ("memci.context", "memci.storage", "memci.formats", "memci.summarizers", "memci.cli")
    assert sorted(m for m in loaded if m.startswith(lazy)) == []
    assert sorted(m for m in loaded if m.split(".")[0] in (*HEAVY, "sqlite3", "tomllib")) == []


@pytest.mark.parametrize(
    ("name", "wing"),
    [
        ("ContextSystem", "memci.context.system"),
        ("SqliteStorage", "memci.storage"),
        ("ModelSummarizer", "memci.summarizers"),
    ],
)
def test_a_wings_name_loads_its_wing_on_first_use_and_still_no_heavy_package(name: str, wing: str) -> None:
    loaded = loaded_after(f"import memci\nmemci.{name}")
    assert wing in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY or m.startswith("memci.cli")) == []


def test_a_wings_names_are_its_modules_own_listed_and_nothing_else_is_made_up() -> None:
    done = run(
        "import memci, memci.context.system as system, memci.storage as storage\n"
        "assert memci.ContextSystem is system.ContextSystem and memci.Storage is storage.Storage\n"
        "assert memci.storage is storage and {'ContextSystem', 'context', 'formats', 'storage'} <= set(dir(memci))\n"
        "from memci import *\n"
        "print(ContextSystem.__module__, DirectoryStorage.__module__)\n"
        "try:\n    memci.NoSuchName\nexcept AttributeError as e:\n    print(e)"
    )
    assert done.stdout.splitlines() == [
        "memci.context.system memci.storage.directory",
        "module 'memci' has no attribute 'NoSuchName'",
    ]


def test_the_top_level_names_are_all_there_without_the_heavy_packages() -> None:
    done = run(
        "import sys, memci\n"
        "missing = [n for n in memci.__all__ if not hasattr(memci, n)]\n"
        "assert not missing, missing\n"
        "print(len(memci.__all__), 'numpy' in sys.modules)"
    )
    count, numpy_loaded = done.stdout.split()
    assert int(count) > 30
    assert numpy_loaded == "False"


def test_numpy_loads_when_indices_is_first_called() -> None:
    assert "numpy" not in loaded_after("import memci\nmemci.MessageArray([{'role': 'user', 'content': 'hi'}]).count()")
    done = run(
        "import memci\n"
        "arr = memci.MessageArray([{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'yo'}])\n"
        "got = arr.indices(role='assistant')\n"
        "print(type(got).__module__, got.dtype, got.tolist())"
    )
    assert done.stdout.split() == ["numpy", "int64", "[1]"]


ORPHAN = "[{'role': 'tool', 'tool_call_id': 'call_1', 'content': 'a result nobody asked for'}]"


def test_an_unconfigured_program_prints_no_memci_warning() -> None:
    done = run(f"import memci\nassert memci.sanitize_messages({ORPHAN}).messages == []")
    assert done.stderr == ""


@pytest.mark.parametrize(
    "configure", ["logging.basicConfig()", "logging.getLogger('memci').addHandler(logging.StreamHandler())"]
)
def test_a_program_that_configures_logging_sees_the_warning(configure: str) -> None:
    done = run(f"import logging, memci\n{configure}\nmemci.sanitize_messages({ORPHAN})")
    assert "call_1" in done.stderr
    assert done.stderr.count("\n") == 1
