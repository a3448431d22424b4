"""The documentation site: its examples run, and its build is strict.

Every ```python block of the home page, the quickstart, the migration guides and the integration pages runs,
offline, in the page's order and one namespace per page.
`make docs` builds the whole site in strict mode; here a small site built with the project's own
settings (mkdocs.yml, inherited) shows that a broken link, a missing anchor or an unresolved API
reference fails that build, and that the same site without them builds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^<!-- requires: (?P<requires>.*?) -->$|^```python\n(?P<code>.*?)^```$", re.DOTALL | re.MULTILINE)
RUN_PAGES = [
    DOCS / "index.md",
    DOCS / "quickstart.md",
    *sorted((DOCS / "migrating").glob("*.md")),
    *sorted((DOCS / "integrations").glob("*.md")),
]


def python_blocks(page: Path) -> list[tuple[list[str], str]]:
    """A page's ```python blocks, in order, each with the modules it needs beyond memci: those a
    ``<!-- requires: a, b -->`` comment before it names (an extra, or an integration)."""
    requires: list[str] = []
    blocks = []
    for found in BLOCK.finditer(page.read_text(encoding="utf-8")):
        if found.group("requires") is not None:
            requires = [*requires, *(name.strip() for name in found.group("requires").split(","))]
        else:
            blocks.append((requires, textwrap.dedent(found.group("code"))))
    return blocks


def test_the_pages_that_must_run_have_examples() -> None:
    names = {page.name for page in RUN_PAGES}
    assert {"quickstart.md", "langchain.md", "llama-index.md"} <= names
    for page in RUN_PAGES:
        assert python_blocks(page), f"{page.relative_to(ROOT)} has no ```python block"


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files an example writes land here
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for number, (requires, block) in enumerate(python_blocks(page), 1):
        for module in requires:  # the dev extra installs them: skipped only without it
            pytest.importorskip(module, reason=f"block {number} and after need {module}")
        code = compile(block, f"{page.relative_to(ROOT)} block {number}", "exec")
        exec(code, namespace)


def mkdocs(config: Path) -> subprocess.CompletedProcess[str]:
    # Not --quiet: mkdocs counts the warnings strict mode aborts on only at the levels it logs.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def small_site(tmp_path: Path, page: str) -> Path:
    """A two-page site on the project's mkdocs.yml: its theme, plugins and validation settings."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n## Anchored\n\nSee [the page](page.md).\n", encoding="utf-8")
    (docs / "page.md").write_text(page, encoding="utf-8")
    for relative in ("python", "scripts"):  # the paths mkdocs.yml names, relative to the config's folder
        (tmp_path / relative).symlink_to(ROOT / relative)
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\n"
        f"docs_dir: {docs}\n"
        f"site_dir: {tmp_path / 'site'}\n"
        "nav:\n  - Home: index.md\n  - Page: page.md\n",
        encoding="utf-8",
    )
    return config


GOOD = (
    "# Page\n\n[home](index.md#anchored), [`PageError`][memci.errors.PageError]\n\n"
    "::: memci.errors.PageError\n\n::: memci.batch\n    options:\n      show_submodules: false\n"
)


def test_a_clean_site_builds_and_reads_the_docstrings_as_markdown(tmp_path: Path) -> None:
    built = mkdocs(small_site(tmp_path, GOOD))
    assert built.returncode == 0, built.stderr
    page = (tmp_path / "site" / "page" / "index.html").read_text(encoding="utf-8")
    assert 'id="memci.errors.PageError"' in page
    # scripts/griffe_docstrings.py: memci.batch's reST roles became links (or code when the target
    # is not on the site), its doctest a code block with prompts, not nested quotes.
    assert 'href="#memci.batch.Pipeline.run"><code>Pipeline.run</code></a>' in page
    assert "<code>MessageArray</code>" in page
    assert not re.search(r":(class|meth|func|mod):", page)
    assert '<span class="gp">&gt;&gt;&gt; </span>' in page
    assert "<blockquote>" not in page


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ("[missing](no-such-page.md)", "no-such-page.md"),
        ("[anchor](index.md#no-such-anchor)", "no-such-anchor"),
        ("[`Nope`][memci.NoSuchName]", "memci.NoSuchName"),
    ],
    ids=["link", "anchor", "api-reference"],
)
def test_strict_build_fails_on(broken: str, named: str, tmp_path: Path) -> None:
    built = mkdocs(small_site(tmp_path, GOOD + "\n" + broken + "\n"))
    assert built.returncode != 0
    assert named in built.stderr + built.stdout
