#!/usr/bin/env bash
# A Rust compiler with the standard library for aarch64-unknown-linux-gnu, for `make dist-aarch64`.
#
#     bash scripts/aarch64_toolchain.sh           # makes sure one is there (installs it if it can)
#     bash scripts/aarch64_toolchain.sh --rustc   # prints the rustc to build with
#
# rustup's own target when it has it; otherwise Debian's rustc-web with its libstd-rust-web-dev for
# arm64 (one source package: the compiler and the library are always the same version), installed
# with apt-get. A standard library built by another compiler version cannot be used, so Debian's
# plain libstd-rust-dev (a much older rustc) does not serve.
set -euo pipefail

target=aarch64-unknown-linux-gnu
debian_rustc=/usr/bin/rustc

has_std() { [[ -d "$("$1" --print sysroot 2>/dev/null)/lib/rustlib/$target/lib" ]]; }

if has_std rustc; then
    [[ ${1:-} == --rustc ]] && command -v rustc
    exit 0
fi
if [[ -x $debian_rustc ]] && has_std "$debian_rustc"; then
    [[ ${1:-} == --rustc ]] && echo "$debian_rustc"
    exit 0
fi
[[ ${1:-} == --rustc ]] && { echo "aarch64_toolchain: no aarch64 toolchain; run it without --rustc first" >&2; exit 1; }

echo "aarch64_toolchain: no Rust standard library for $target: installing Debian's rustc-web and libstd-rust-web-dev:arm64"
if ! command -v apt-get >/dev/null || [[ $(id -u) != 0 ]]; then
    echo "aarch64_toolchain: cannot install it here (needs apt-get as root); use 'rustup target add $target'" >&2
    exit 1
fi
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq
if ! apt-get install -y -qq --no-install-recommends rustc-web libstd-rust-web-dev:arm64 >/dev/null; then
    echo "aarch64_toolchain: apt-get could not install rustc-web and libstd-rust-web-dev:arm64" >&2
    exit 1
fi
has_std "$debian_rustc" || { echo "aarch64_toolchain: $debian_rustc has no $target library after the install" >&2; exit 1; }
echo "aarch64_toolchain: $($debian_rustc --version) with the $target standard library"
