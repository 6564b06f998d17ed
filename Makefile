# One task runner: CI calls these same targets.
CARGO ?= cargo
JOBS  ?= 2
PY    := $(CURDIR)/.venv/bin/python
export LOADERX_REF_PYTHON := $(CURDIR)/.venv-ref/bin/python
export LOADERX_REQUIRE_REF := 1

.PHONY: demo test setup py-build test-rust test-py test-wheel test-wasm-build lint bench bench-py crash fixtures-check

## The main job: train from the DataLoader, stream an image store, inspect it.
demo: setup py-build
	$(CARGO) build --release -j$(JOBS) -p loaderx-native
	$(PY) scripts/demo.py --workdir demo-data
	./target/release/loaderx info demo-data/images_64x64x3

## Every test suite, after installing what they need.
test: setup lint test-rust test-wasm-build py-build test-py test-wheel fixtures-check

setup:
	./scripts/setup.sh

## Build the Python extension into .venv (incremental).
py-build:
	VIRTUAL_ENV=$(CURDIR)/.venv $(CURDIR)/.venv/bin/maturin develop --release -q -m py/Cargo.toml

test-rust:
	$(CARGO) test -j$(JOBS) -p loaderx-core -p loaderx-native

test-py:
	$(PY) -m pytest py/tests -q

## `maturin build` makes a wheel that installs and works in a fresh venv.
test-wheel:
	./scripts/test_wheel.sh

test-wasm-build:
	$(CARGO) build -j$(JOBS) -p loaderx-core --target wasm32-unknown-unknown --release

lint:
	$(CARGO) clippy --workspace --all-targets -j$(JOBS) -- -D warnings

## The crash loop with more cycles.
crash:
	LOADERX_CRASH_CYCLES=1000 $(CARGO) test --release -j$(JOBS) -p loaderx-native --test crash_append_leaves_prefix

bench:
	$(CARGO) bench -j$(JOBS) -p loaderx-native --bench gather

bench-py: setup py-build
	$(PY) scripts/bench.py all

## tests/fixtures/v3 is a copy of ../shared/fixtures/v3; check they still agree where both exist.
fixtures-check:
	@if [ -d ../shared/fixtures/v3 ]; then diff -r ../shared/fixtures/v3 tests/fixtures/v3 && echo "fixtures: identical to ../shared"; else echo "fixtures: ../shared not present, skipped"; fi
