#!/usr/bin/env bash
# Builds the sdist from a clean copy of the tree (tracked and new files, nothing ignored: no build
# products), installs it with pip into a fresh venv, then imports memci there and counts tokens.
#
#     bash scripts/check_sdist.sh PYTHON
#
# PYTHON makes the venvs (3.11 or later). With CARGO_TARGET_DIR set (`make sdist-check` sets it to
# the tree's target/), the registry crates already compiled there are reused; memci itself is
# compiled from the sdist's own sources, so a file missing from the sdist fails the build.
set -euo pipefail

python=${1:-python3}
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

# Installed into a fresh venv, and used from a directory that holds no memci sources.
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$sdist"
cd "$work"
"$work/venv/bin/python" - <<'EOF'
import memci

assert "site-packages" in memci.__file__, memci.__file__
assert memci.tokens.count("hello world") == 2
assert memci.tokens.count("hello world", encoding="cl100k_base") == 2
print(f"memci {memci.__version__} from the sdist: imports, counts tokens")
EOF
