"""What the import contracts (``lint-imports``, ``[tool.importlinter]`` in pyproject.toml) cannot
see: ``from memci import _core`` reads to them as an import of the package itself, so they leave
such imports out. Here: a module of memci imports only modules from the package, never a name of
its ``__init__`` (which imports every wing: that would be an import circle)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import memci
import pytest

PACKAGE = Path(memci.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def names_from_the_package(source: str) -> list[str]:
    """What ``source`` imports from the package ``memci`` itself: ``from memci import x`` gives
    ``x``, ``import memci`` gives ``"memci"``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "memci" and node.level == 0:
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            found += ["memci" for alias in node.names if alias.name == "memci"]
    return found


def test_the_check_sees_what_it_looks_for() -> None:
    source = "import memci\nfrom memci import _core, tokens\ndef f():\n    from memci import ContextSystem\n"
    assert names_from_the_package(source) == ["memci", "_core", "tokens", "ContextSystem"]
    assert len(MODULES) > 30


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_only_modules_from_the_package(path: Path) -> None:
    for name in names_from_the_package(path.read_text(encoding="utf-8")):
        assert name != "memci", f"{path.name}: import memci (import the module it needs instead)"
        assert importlib.util.find_spec(f"memci.{name}") is not None, (
            f"{path.name}: from memci import {name}: not a module (import it from the module that defines it)"
        )
