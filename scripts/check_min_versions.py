"""Runs each extra's tests with the extra's packages at their lower bounds (`make min-versions`).

    python scripts/check_min_versions.py WHEEL [EXTRA ...]

For each extra (all of them by default) a fresh venv under target/min-versions/ gets memci's WHEEL
with that extra, every requirement of the extra pinned to the version its lower bound names
(``langchain>=1.3`` installs ``langchain==1.3``), and the test tools; then the tests that use the
extra run there against the installed wheel. The bounds in pyproject.toml are the oldest versions
these runs pass on. Exit status 1 when any extra fails, naming it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "target" / "min-versions"
# The test tools the suites need (pyproject's addopts name pytest-benchmark's flag).
TEST_TOOLS = ["pytest>=8", "hypothesis>=6.100", "pytest-asyncio>=1.0", "pytest-benchmark>=5"]
# The tests (and pytest arguments) each extra's packages serve. Redis tests start their own
# redis-server on 127.0.0.1, or skip without one; the async stores' file also tests AsyncRedisStorage,
# which the redis extra's run covers.
TESTS = {
    "langchain": ["tests/integrations/test_langchain.py", "tests/test_optional.py"],
    "langgraph": ["tests/integrations/test_langgraph.py"],
    "llama-index": ["tests/integrations/test_llama_index.py"],
    "openai-agents": ["tests/integrations/test_openai_agents.py"],
    "redis": ["tests/storage/test_stores.py", "tests/storage/test_commits.py"],
    "async": ["tests/storage/test_async_stores.py", "-k", "not redis"],
    "arrow": ["tests/batch/test_batch_arrow.py"],
    "ray": ["tests/batch/test_batch_ray.py"],
}
LOWER_BOUND = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+(\[[^\]]*\])?)\s*>=\s*(?P<version>[^,;\s]+)")


def pinned(requirement: str) -> str:
    """``name[extras]>=X,...`` as ``name[extras]==X``: the requirement at its lower bound."""
    found = LOWER_BOUND.match(requirement)
    if found is None:
        raise SystemExit(f"min-versions: {requirement!r} names no lower bound (>=)")
    return f"{found['name']}=={found['version']}"


def check(extra: str, requirements: list[str], wheel: Path) -> bool:
    where = WORK / extra
    shutil.rmtree(where, ignore_errors=True)
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    pins = [pinned(r) for r in requirements]
    print(f"== {extra}: {' '.join(pins)}", flush=True)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", f"{wheel}[{extra}]", *pins, *TEST_TOOLS],
        check=True,
    )
    # From the tree's root (its tests and pyproject's pytest settings), with memci from the wheel:
    # the sources under python/ are not on the path.
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS[extra]], check=False, cwd=ROOT
    )
    return done.returncode == 0


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit(__doc__)
    wheel, wanted = Path(argv[0]).resolve(), argv[1:]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    unknown = set(wanted) - set(TESTS)
    if unknown:
        raise SystemExit(f"min-versions: no tests listed for {sorted(unknown)}; known: {sorted(TESTS)}")
    failed = [extra for extra in wanted or list(TESTS) if not check(extra, extras[extra], wheel)]
    if failed:
        print(f"min-versions: the lower bounds of {', '.join(failed)} fail their tests", file=sys.stderr)
        return 1
    print(f"min-versions: every extra passes its tests at its lower bounds ({', '.join(wanted or TESTS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
