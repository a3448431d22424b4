"""``memci`` (python/memci/cli/main.py): the command's own options."""

from __future__ import annotations

import subprocess
import sys

import memci
import pytest
from memci.cli.main import main


def test_version_prints_the_installed_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"memci {memci.__version__}\n"


def test_python_dash_m_memci_version() -> None:
    done = subprocess.run([sys.executable, "-m", "memci", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["memci", memci.__version__]
