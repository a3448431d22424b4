#!/usr/bin/env bash
# Builds the sdist from a clean copy of the tree (tracked and new files, nothing ignored: no build
# products), then builds the Linux wheel from the sdist's own sources with zig for MANYLINUX and
# checks it (scripts/check_wheel.sh: its tag, `auditwheel show`, an install into a fresh venv that
# imports memci and counts). Elsewhere than Linux the sdist itself is installed and checked.
#
#     MANYLINUX=manylinux_2_17 PROFILE=release bash scripts/check_sdist.sh PYTHON
#
# PYTHON makes the venvs (3.11 or later). With CARGO_TARGET_DIR set (`make sdist-check` sets it to
# the tree's target/), the registry crates already compiled there are reused; memci itself is
# compiled from the sdist's own sources, so a file missing from the sdist fails the build.
set -euo pipefail

python=${1:-python3}
policy=${MANYLINUX:-manylinux_2_17}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The clean copy.
mkdir "$work/src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$root" && xargs -0 cp --parents -t "$work/src")

# The sdist, built there.
"$python" -m venv "$work/build"
"$work/build/bin/pip" install -q 'maturin>=1.14,<2'
(cd "$work/src" && "$work/build/bin/maturin" sdist --out "$work/dist" >/dev/null)
sdist=$(ls "$work"/dist/memci-*.tar.gz)
echo "sdist: $(basename "$sdist") ($(du -h "$sdist" | cut -f1))"

if [[ $(uname -s) != Linux ]]; then
    bash "$root/scripts/check_install.sh" "$python" "$sdist"
    exit 0
fi

# The manylinux wheel, built from the sdist's sources alone; zig (PyPI's ziglang, which maturin
# runs as `python3 -m ziglang`) links it against glibc's oldest symbol versions.
"$work/build/bin/pip" install -q 'ziglang>=0.13' 'auditwheel>=6.1'
tar -xzf "$sdist" -C "$work/dist"
(cd "$work"/dist/memci-*/ && PATH="$work/build/bin:$PATH" "$work/build/bin/maturin" build --quiet \
    --profile "${PROFILE:-release}" --zig --compatibility "$policy" --out "$work/wheel")
bash "$root/scripts/check_wheel.sh" "$work/build/bin/python" "$policy" "$work"/wheel/memci-*.whl
