#!/usr/bin/env bash
# Checks a built Linux wheel: its file is tagged MANYLINUX, `auditwheel show` finds its symbols
# and libraries consistent with that tag (no newer glibc symbol version, no library outside the
# policy), and, when the wheel is for this machine's architecture, it installs into a fresh venv,
# imports and counts (scripts/check_install.sh).
#
#     bash scripts/check_wheel.sh PYTHON MANYLINUX WHEEL     # e.g. .venv/bin/python manylinux_2_17 dist/memci-...whl
#
# PYTHON has auditwheel installed (`make dist` installs it into .venv).
set -euo pipefail

python=${1:?usage: check_wheel.sh PYTHON MANYLINUX WHEEL}
policy=${2:?usage: check_wheel.sh PYTHON MANYLINUX WHEEL}
wheel=${3:?usage: check_wheel.sh PYTHON MANYLINUX WHEEL}
[[ -f $wheel ]] || { echo "check_wheel: no wheel at $wheel" >&2; exit 1; }
name=$(basename "$wheel")
arch=$(grep -oE '(x86_64|aarch64|i686|ppc64le|s390x|armv7l)\.whl$' <<<"$name" || true)
arch=${arch%.whl}
echo "$name"

if [[ ! ${name%.whl}. =~ [-.]${policy}_${arch}\. ]]; then
    echo "check_wheel: $name is not tagged ${policy}_${arch}: PyPI accepts only manylinux/musllinux Linux wheels" >&2
    exit 1
fi

# auditwheel's verdict: the most compatible tag the wheel's symbols and libraries allow.
shown=$("$python" -m auditwheel show "$wheel")
echo "$shown"
allowed=$(tr '\n' ' ' <<<"$shown" | sed -nE 's/.*consistent with the following platform tag: *"([^"]+)".*/\1/p')
if [[ $allowed != "${policy}_${arch}" ]]; then
    echo "check_wheel: auditwheel allows ${allowed:-no manylinux tag}, not ${policy}_${arch}" >&2
    exit 1
fi

if [[ $arch == "$(uname -m)" ]]; then
    bash "$(dirname "$0")/check_install.sh" "$python" "$wheel"
else
    echo "check_wheel: a $arch wheel: inspected, not installed (this machine is $(uname -m))"
fi
