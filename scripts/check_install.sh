#!/usr/bin/env bash
# Installs a built memci (a wheel or an sdist) with pip into a fresh venv, then imports memci there,
# from a directory that holds no memci sources, and counts tokens.
#
#     bash scripts/check_install.sh PYTHON ARTIFACT
#
# PYTHON makes the venv (3.11 or later). scripts/check_sdist.sh runs it on the sdist it builds,
# `make wheel-check` and the release workflow on each wheel they can run.
set -euo pipefail

python=${1:?usage: check_install.sh PYTHON ARTIFACT}
artifact=$(cd "$(dirname "${2:?usage: check_install.sh PYTHON ARTIFACT}")" && pwd)/$(basename "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
[[ -x $venv_python ]] || venv_python="$work/venv/Scripts/python.exe"  # Windows
"$venv_python" -m pip install -q "$artifact"
cd "$work"
"$venv_python" - "$(basename "$artifact")" <<'PY'
import sys

import memci

assert "site-packages" in memci.__file__, memci.__file__
assert memci.tokens.count("hello world") == 2
assert memci.tokens.count("hello world", encoding="cl100k_base") == 2
print(f"memci {memci.__version__} from {sys.argv[1]}: installs, imports, counts tokens")
PY
