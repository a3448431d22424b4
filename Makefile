# memci: every build, check and run goes through this file, in CI too.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# The cargo profile of the extension: release (benchmarks, CI) or fast (iterating; see Cargo.toml).
PROFILE ?= release
# Cargo features of the extension: empty for the package; `make bench` adds count-alloc (the
# counting allocator the memory bench reads).
FEATURES ?=
# The test binaries link libpython; tell cargo which interpreter and where its library lives.
export PYO3_PYTHON := $(abspath $(PY))
# The documentation site, strict: a warning (a broken link or anchor, an unresolved API reference)
# fails the build. Not --quiet: mkdocs counts the warnings strict mode stops on only when it logs them.
DOCS_BUILD = NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site
# The frameworks' own test suites on memci's adapters (tests/peer_suites/run.py): their sdists are
# fetched once with pip into a cache outside the repository.
PEER_SUITES = $(PY) tests/peer_suites/run.py
PYLIBDIR = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')

.PHONY: help
help: ## Show this help
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'maturin>=1.14,<2'
	touch $@

.PHONY: install
install: $(VENV)/.installed ## Create .venv with maturin (build-dev adds every dependency)

.PHONY: build-dev
build-dev: install ## Build the extension into .venv (PROFILE=fast: quicker, for iterating)
	rm -f python/memci/_core.cpython-*.so  # a build from before the abi3 module would shadow it
	$(BIN)/maturin develop --profile $(PROFILE) --extras dev,bench $(if $(FEATURES),--features $(FEATURES))

.PHONY: lint
lint: build-dev ## cargo fmt, clippy -D warnings, ruff, mypy, stubtest, the import layering
	cargo fmt --all -- --check
	cargo clippy --all-targets -q -- -D warnings
	cargo clippy --all-targets -q --features count-alloc -- -D warnings
	$(BIN)/ruff check python tests benches
	$(BIN)/ruff format --check python tests benches
	$(BIN)/mypy
	$(PY) -m mypy.stubtest memci._core --allowlist .stubtest-allowlist
	$(BIN)/lint-imports

.PHONY: redis-server
redis-server: ## Install redis-server with apt-get if it is missing (the RedisStorage tests skip without it)
	@command -v redis-server >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq redis-server >/dev/null 2>&1 || \
		  { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq redis-server >/dev/null 2>&1; }; }; } || \
		echo "redis-server could not be installed: the RedisStorage tests will be skipped"

.PHONY: postgres-server
postgres-server: ## Install PostgreSQL with apt-get if it is missing (the tests start a cluster of their own on loopback)
	@{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || \
		{ command -v apt-get >/dev/null 2>&1 && \
		{ apt-get install -y -qq postgresql >/dev/null 2>&1 || \
		  { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq postgresql >/dev/null 2>&1; }; }; } || \
		echo "PostgreSQL could not be installed: the PostgresStorage tests will be skipped"

.PHONY: test
test: build-dev lint redis-server postgres-server ## Build, lint, cargo tests, pytest (benches once, untimed), the docs site (strict), the sdist check
	LD_LIBRARY_PATH=$(PYLIBDIR) cargo test -q
	$(BIN)/pytest -q --durations=20
	$(DOCS_BUILD)
	$(MAKE) sdist-check

.PHONY: test-edits
test-edits: build-dev ## The context edits against their reference model: 10,000 generated edit sequences per format
	$(BIN)/pytest -q tests/test_edits.py -k sequences --hypothesis-profile=edits

.PHONY: peer-suites
peer-suites: build-dev ## The frameworks' own test suites (fetched sdists), native vs memci's class (CI runs it after make test)
	$(PEER_SUITES)

.PHONY: docs
docs: build-dev ## Build the documentation site into site/ (mkdocs-material + mkdocstrings, strict: a broken link fails)
	$(DOCS_BUILD)

# The Linux wheels' platform: glibc 2.17 and later (manylinux2014). zig links the extension against
# that glibc's symbol versions, whatever glibc the build machine has (see docs/installing.md).
MANYLINUX ?= manylinux_2_17
# maturin finds zig (PyPI's ziglang) as `python3 -m ziglang` on the PATH.
ZIG_PATH = PATH=$(abspath $(BIN)):$$PATH

$(VENV)/.dist-tools: $(VENV)/.installed
	$(PY) -m pip install -q 'ziglang>=0.13' 'auditwheel>=6.1'
	touch $@

.PHONY: dist
dist: $(VENV)/.dist-tools ## Build this machine's manylinux abi3 wheel (release, zig) and the sdist into dist/; check the wheel
	rm -f dist/memci-*$(MANYLINUX)_$(shell uname -m)*.whl dist/memci-*.tar.gz
	$(ZIG_PATH) $(BIN)/maturin build --release --zig --compatibility $(MANYLINUX) --out dist
	$(BIN)/maturin sdist --out dist
	bash scripts/check_wheel.sh $(PY) $(MANYLINUX) dist/memci-*$(MANYLINUX)_$(shell uname -m).whl

.PHONY: dist-aarch64
dist-aarch64: $(VENV)/.dist-tools ## Cross-build the manylinux aarch64 wheel into dist/ (Debian's rustc-web and its arm64 std: installed with apt-get)
	bash scripts/aarch64_toolchain.sh
	rm -f dist/memci-*$(MANYLINUX)_aarch64*.whl
	$(ZIG_PATH) RUSTC=$$(bash scripts/aarch64_toolchain.sh --rustc) \
		$(BIN)/maturin build --release --zig --compatibility $(MANYLINUX) --target aarch64-unknown-linux-gnu --out dist
	bash scripts/check_wheel.sh $(PY) $(MANYLINUX) dist/memci-*$(MANYLINUX)_aarch64*.whl

.PHONY: min-versions
min-versions: install ## Each extra at its lower bounds in a venv of its own, running its tests (EXTRAS="a b": only those)
	rm -rf target/min-versions/wheel
	$(BIN)/maturin build --profile $(PROFILE) --out target/min-versions/wheel
	$(PY) scripts/check_min_versions.py target/min-versions/wheel/memci-*.whl $(EXTRAS)

.PHONY: sdist-check
sdist-check: install ## The sdist from a clean copy; the manylinux wheel built from it, checked by auditwheel, installed into a fresh venv, imported
	CARGO_TARGET_DIR=$(abspath target) MANYLINUX=$(MANYLINUX) PROFILE=$(PROFILE) bash scripts/check_sdist.sh $(PY)

.PHONY: bench
bench: FEATURES = count-alloc
bench: build-dev ## Run the benchmarks against the peers and print the table (built with count-alloc)
	mkdir -p bench-results
	MEMCI_BENCH_SIZES=$${MEMCI_BENCH_SIZES:-1000,10000,100000} $(BIN)/pytest benches -q --benchmark-enable --benchmark-only --benchmark-columns=median,iqr,rounds \
		--benchmark-sort=name --benchmark-json=bench-results/latest.json
	$(PY) benches/report.py bench-results/latest.json

.PHONY: bench-batch-large
bench-batch-large: build-dev ## The batch bench on a generated 200 MB JSONL: every peer once, the floors, the CLI's peak memory
	MEMCI_BATCH_MB=$${MEMCI_BATCH_MB:-200} $(PY) benches/bench_batch.py

.PHONY: demo
demo: build-dev ## Run the main job: 300 rounds of an agent conversation through a ContextSystem on SQLite
	$(PY) -m memci demo

.PHONY: fmt
fmt: install ## Format Rust and Python sources
	cargo fmt --all
	$(BIN)/ruff format python tests benches
	$(BIN)/ruff check --fix python tests benches

.PHONY: clean
clean: ## Remove build products and the venv
	rm -rf target site $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .hypothesis
