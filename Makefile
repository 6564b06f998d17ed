# One task runner: CI calls these same targets.
CARGO ?= cargo
JOBS  ?= 2
export LOADERX_REF_PYTHON := $(CURDIR)/.venv-ref/bin/python
export LOADERX_REQUIRE_REF := 1

.PHONY: demo test setup test-rust test-wasm-build lint bench crash fixtures-check

## The main job.
demo: setup
	$(CARGO) build --release -j$(JOBS) -p loaderx-native
	./target/release/loaderx info tests/fixtures/v3/u8img_zstd_dict/store
	./target/release/loaderx verify tests/fixtures/v3/u8img_zstd_dict/store
	$(CARGO) bench -j$(JOBS) -p loaderx-native --bench gather -- --quick
	@echo "The Python demo (convert a dataset, train from the DataLoader) is coming with the Python package."

## Every test suite, after installing what they need.
test: setup lint test-rust test-wasm-build fixtures-check

setup:
	./scripts/setup.sh

test-rust:
	$(CARGO) test --workspace -j$(JOBS)

test-wasm-build:
	$(CARGO) build -j$(JOBS) -p loaderx-core --target wasm32-unknown-unknown --release

lint:
	$(CARGO) clippy --workspace --all-targets -j$(JOBS) -- -D warnings

## The crash loop with more cycles.
crash:
	LOADERX_CRASH_CYCLES=1000 $(CARGO) test --release -j$(JOBS) -p loaderx-native --test crash_append_leaves_prefix

bench:
	$(CARGO) bench -j$(JOBS) -p loaderx-native --bench gather

## tests/fixtures/v3 is a copy of ../shared/fixtures/v3; check they still agree where both exist.
fixtures-check:
	@if [ -d ../shared/fixtures/v3 ]; then diff -r ../shared/fixtures/v3 tests/fixtures/v3 && echo "fixtures: identical to ../shared"; else echo "fixtures: ../shared not present, skipped"; fi
