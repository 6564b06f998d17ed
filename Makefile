# One task runner: CI calls these same targets.
CARGO ?= cargo
JOBS  ?= 2
PY    := $(CURDIR)/.venv/bin/python
export LOADERX_REF_PYTHON := $(CURDIR)/.venv-ref/bin/python
export LOADERX_REQUIRE_REF := 1

FUZZ_SECONDS ?= 60

# CI (.ci/run sets LOADERX_CI_PRUNE=1) removes a suite's build tree once the suite has passed: a
# fresh-clone run builds a dozen trees, and disk is what runs out there. Elsewhere they stay,
# so the next run is incremental.
PRUNE = $(if $(LOADERX_CI_PRUNE),rm -rf $(1),true)

# With LOADERX_SUITE_TIMES naming a file (.ci/run sets it), every recipe line runs through a shell
# that adds its time to that file under the target's name; scripts/suite_times.sh prints the table.
ifdef LOADERX_SUITE_TIMES
SHELL := $(CURDIR)/scripts/timed_shell.sh
.SHELLFLAGS = $@ -c
endif

.PHONY: soak fuzz-smoke demo demo-build setup-demo test test-tooling test-ml test-windows setup py-build js-build test-rust test-py test-wheel test-npm dist release-check test-js test-browser test-golden test-viewer viewer bench-viewer lint bench bench-py bench-js crash fixtures-check

## The main job: train from the DataLoader, stream an image store, inspect it. It installs only
## what it uses (`scripts/setup.sh demo`) and builds only the Python extension, whose `loaderx`
## command inspects the store.
demo: demo-build
	$(PY) scripts/demo.py --workdir demo-data
	$(CURDIR)/.venv/bin/loaderx info demo-data/images_64x64x3
	@echo
	@echo "browse it in the viewer: make viewer STORE=demo-data/images_64x64x3   (or: npx --prefix js loaderx-view demo-data/images_64x64x3)"

## Every test suite, after installing what they need. Nothing may skip: under LOADERX_REQUIRE_ALL=1
## (passed on to every prerequisite) a test that would skip for a missing server, browser, tool or
## package fails, naming it (py/tests/_require_all.py, js/test/helpers/require_all.mjs).
test: export LOADERX_REQUIRE_ALL := 1
test: setup lint test-tooling test-rust js-build py-build test-wheel test-ml test-npm test-js test-browser test-golden test-viewer fuzz-smoke fixtures-check test-windows

setup:
	./scripts/setup.sh all

setup-demo:
	./scripts/setup.sh demo

# Where cargo puts its output.
CARGO_OUT := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)

## The demo's extension. Where the full one was built before, that one (incrementally); on a fresh
## tree, one for local stores only, in its own target dir: the object-storage client is more than
## half of a full build's compile time, and the demo reads local stores. `make py-build` (and so
## `make test`) installs the full one.
demo-build: setup-demo
	@if [ -d "$(CARGO_OUT)/release/.fingerprint" ]; then \
	  VIRTUAL_ENV=$(CURDIR)/.venv $(CURDIR)/.venv/bin/maturin develop --release -q -m py/Cargo.toml; else \
	  echo "demo: building the extension for local stores (make py-build builds the full one)"; \
	  CARGO_TARGET_DIR=$(CARGO_OUT)/demo RUSTFLAGS="--cfg loaderx_local_only" VIRTUAL_ENV=$(CURDIR)/.venv \
	    $(CURDIR)/.venv/bin/maturin develop --release -q -m py/Cargo.toml; fi

# CI (.ci/run sets LOADERX_PY_WHEEL=1) installs the release wheel for this machine, built as
# `make dist` builds it (scripts/wheel.sh), instead of a development build: test-wheel tests that
# same wheel, so CI compiles the extension once.
HOST_WHEELS := $(CURDIR)/target/host-wheel
## Build the Python extension into .venv (incremental).
py-build:
ifdef LOADERX_PY_WHEEL
	JOBS=$(JOBS) ./scripts/wheel.sh x86_64-unknown-linux-gnu $(HOST_WHEELS) $(CURDIR)/.venv
else
	VIRTUAL_ENV=$(CURDIR)/.venv $(CURDIR)/.venv/bin/maturin develop --release -q -m py/Cargo.toml
endif

## The wasm reader, plain and threaded, into js/pkg/ (incremental).
js-build:
	JOBS=$(JOBS) ./scripts/build_wasm.sh

## The build scripts' own checks (CARGO_TARGET_DIR, what `make demo` installs).
test-tooling:
	$(PY) -m pytest tests/tooling -q -p no:cacheprovider

test-rust:
	$(CARGO) test -j$(JOBS) -p loaderx-core -p loaderx-native --features loaderx-native/fault-injection

# Every store the Python tests write is exported (trimmed, with per-record hashes) for test-js.
PY_STORES := $(CURDIR)/artifacts/py-stores
## The pytest suite against the development build in .venv (`make test` runs it against the
## release wheel instead: test-wheel).
test-py:
	rm -rf $(PY_STORES)
	LOADERX_EXPORT_STORES=$(PY_STORES) $(PY) -m pytest py/tests -q

## node:test suite of the js package: fixtures, the Python tests' stores, errors, sampler, QA.
test-js:
	cd js && LOADERX_EXPORT_STORES=$(PY_STORES) LOADERX_REQUIRE_PY_STORES=1 LOADERX_REQUIRE_PY=1 node --test test/*.test.mjs

## The same stores in headless Chromium (plain and threaded builds; HTTP Range and Files).
test-browser:
	LOADERX_EXPORT_STORES=$(PY_STORES) node js/test/browser/run.mjs

## The viewer end to end in headless Chromium (screenshots in artifacts/viewer/).
test-viewer:
	node js/test/viewer/run.mjs

## The viewer's speed targets (pages of a 100,000-record store within 500 ms, no stall over 200 ms).
bench-viewer:
	LOADERX_VIEWER_TARGETS=1 node js/test/viewer/run.mjs

## The dataset viewer for STORE (STORE2: a second stream, PORT: default 8765) on 127.0.0.1; prints the URL.
viewer: setup js-build
	@test -n "$(STORE)" || { echo "usage: make viewer STORE=path/to/store [STORE2=path] [PORT=8765]" >&2; exit 2; }
	node js/bin/loaderx-view.mjs "$(STORE)" $(if $(STORE2),--store2 "$(STORE2)") $(if $(PORT),--port $(PORT))

## One golden store set; native, Python, Node and Chromium must report identical hashes.
test-golden:
	./tests/golden/run.sh

## loaderx-core and loaderx-native built for x86_64-pc-windows-gnu, tested under wine (installs
## mingw-w64 and wine64 if missing; builds in target/windows).
test-windows:
	JOBS=$(JOBS) ./scripts/test_windows.sh
	$(call PRUNE,target/windows)

## The release wheel for this machine (manylinux_2_17 x86_64, abi3), the win_amd64 wheel, the sdist
## and the npm tarball, built as `make dist` builds them and checked; the whole pytest suite runs against the
## wheel in a fresh venv (exporting its stores for test-js); the sdist builds with pip.
test-wheel:
	rm -rf $(PY_STORES)
	LOADERX_EXPORT_STORES=$(PY_STORES) JOBS=$(JOBS) ./scripts/test_wheel.sh
	$(call PRUNE,target/dist .venv-wheel)

## The npm tarball: check_dist, publint, attw, and an offline install into a fresh Node project
## running the README snippet and `npx loaderx-qa`.
test-npm:
	./scripts/test_npm.sh

## loaderx.torch and loaderx.jax (torch DataLoader workers under fork and spawn, torchdata's
## StatefulDataLoader, JAX global arrays over 4 host devices) and the examples/, in the venv
## setup.sh keeps in ~/.cache (torch, JAX); the development build is installed into it.
ML_VENV ?= $(or $(LOADERX_ML_VENV),$(HOME)/.cache/loaderx-tools/venv-ml)
test-ml: ml-build
	$(ML_VENV)/bin/python -m pytest -q py/tests_ml

.PHONY: ml-build
ml-build: setup
ifdef LOADERX_PY_WHEEL
	ls $(HOST_WHEELS)/loaderx-*.whl >/dev/null 2>&1 || JOBS=$(JOBS) ./scripts/wheel.sh x86_64-unknown-linux-gnu $(HOST_WHEELS)
	$(ML_VENV)/bin/python -m pip install -q --force-reinstall --no-deps $(HOST_WHEELS)/loaderx-*.whl
else
	VIRTUAL_ENV=$(ML_VENV) $(CURDIR)/.venv/bin/maturin develop --release -q -m py/Cargo.toml
endif

## Every release artifact into dist/: abi3 wheels for eight platforms, cp314t wheels, the sdist
## and the npm tarball, each checked by scripts/check_dist.py.
dist: setup js-build
	JOBS=$(JOBS) ./scripts/dist.sh

## `make dist`, then what can run here: the aarch64 wheel under qemu, native's tests for Windows
## under wine; writes the result into docs/release.md.
release-check: setup js-build
	JOBS=$(JOBS) ./scripts/release_check.sh

## Every static check, each one a gate: rustfmt (the workspace and fuzz/), clippy with warnings as
## errors, the `_loaderx.pyi` stubs against the built extension (mypy stubtest, so it needs
## py-build), mypy --strict over the Python package and py/tests/typing (a typed script over the
## public API, and misuse it must reject; config in py/pyproject.toml), ruff over every Python file
## of the package, the tests and the scripts (config in py/pyproject.toml), and tsc over the js
## package (its sources import js/pkg, so it needs js-build) and biome over its JS (js/biome.json).
lint: setup py-build js-build
	$(CARGO) fmt --all --check
	$(CARGO) fmt --check --manifest-path fuzz/Cargo.toml
	$(CARGO) clippy --workspace --all-targets -j$(JOBS) -- -D warnings
	$(PY) -m mypy.stubtest loaderx._loaderx
	$(PY) -m mypy --strict --config-file py/pyproject.toml py/python/loaderx py/tests/typing
	$(CURDIR)/.venv/bin/ruff check --config py/pyproject.toml py/python py/tests py/tests_ml tests scripts
	cd js && npm run typecheck
	cd js && npm run lint

## Each cargo-fuzz target for FUZZ_SECONDS (nightly, libFuzzer), seeded from the fixtures.
## Crashers land in fuzz/artifacts/<target>/; commit them to fuzz/regressions/<target>/.
fuzz-smoke:
	./scripts/fuzz_smoke.sh $(FUZZ_SECONDS)
	$(call PRUNE,fuzz/target)

## Every robustness suite at full size (crash loop 1,000 kills per operation, fuzzing, corruption
## sweeps, stress, Miri, AddressSanitizer); regenerates docs/reliability.md.
soak: setup py-build js-build
	./scripts/soak.sh

## The crash loop with more cycles.
crash:
	LOADERX_CRASH_CYCLES=1000 $(CARGO) test --release -j$(JOBS) -p loaderx-native --test crash_loop_reaches_valid_states -- --nocapture

bench:
	$(CARGO) bench -j$(JOBS) -p loaderx-native --bench gather

## Node and Chromium (plain, threaded) beside native single-thread, same store, one run.
bench-js: setup js-build
	node scripts/bench_js.mjs

bench-py: setup py-build
	$(PY) scripts/bench.py all

## The loader with a CPU-heavy per-sample transform: loaderx thread workers and worker processes
## beside torch's DataLoader with worker processes, one run. torch goes into .venv-bench on first
## use (about 5 GB with its CUDA wheels).
.PHONY: bench-transform bench-remote bench-venv
bench-transform: setup py-build bench-venv
	$(PY) scripts/bench.py transform

## Remote stores on a local S3 server (s3s-fs, installed once) through a delay proxy: cold epochs beside MosaicML
## Streaming and LitData (in .venv-bench), warm cache and loader beside the local store.
bench-remote: setup py-build bench-venv
	@test -x $(HOME)/.cache/loaderx-tools/bin/s3s-fs || \
	  cargo install s3s-fs --version 0.14.1 --locked --features binary -j$(JOBS) --root $(HOME)/.cache/loaderx-tools
	$(PY) scripts/bench.py remote

## loaderx.torch beside torch's DataLoader over a memmap, loaderx.jax beside the base loader
## (scripts/bench_ml.py in the torch/JAX venv of setup.sh).
.PHONY: bench-ml
bench-ml: ml-build
	$(PY) scripts/bench.py torch
	$(PY) scripts/bench.py jax

## torch, MosaicML Streaming and LitData for the benchmarks, in .venv-bench (installed once).
bench-venv:
	@$(CURDIR)/.venv-bench/bin/python -c "import torch, numpy, streaming, litdata, boto3" 2>/dev/null || \
	  { python3 -m venv $(CURDIR)/.venv-bench && $(CURDIR)/.venv-bench/bin/pip install -q torch numpy mosaicml-streaming litdata boto3; }

## Packed token batches beside LitData's TokensLoader and Grain's packing (their venv: below).
## Images/s of decode + RandomResizedCrop(224) + flip: ours, torch's DataLoader (4 worker
## processes, torchvision), Pillow in our worker processes, libjpeg-turbo's decode limit (a C loop;
## libjpeg-turbo's headers from Debian's libjpeg62-turbo-dev), time to the first batch.
.PHONY: bench-images
bench-images: ml-build
	@test -f /usr/include/jpeglib.h || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq libjpeg62-turbo-dev >/dev/null; }
	$(ML_VENV)/bin/python scripts/bench_images.py --count 2000 --seconds 8

.PHONY: bench-packed bench-peers-venv
bench-packed: setup py-build bench-peers-venv
	$(PY) scripts/bench.py packed

## LitData and Grain for the packed benchmark, installed once into ~/.cache/loaderx-tools/venv-peers,
## on top of the torch/JAX venv of setup.sh (a .pth file shares its packages, so torch is not
## installed twice).
PEERS_VENV ?= $(HOME)/.cache/loaderx-tools/venv-peers
bench-peers-venv: setup
	@$(PEERS_VENV)/bin/python -c "import litdata, grain, array_record" 2>/dev/null || { \
	  python3 -m venv $(PEERS_VENV) && \
	  $(ML_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
	    "$$($(PEERS_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/venv_ml.pth" && \
	  $(PEERS_VENV)/bin/pip install -q litdata==0.2.76 grain==0.2.18; }

## tests/fixtures matches its committed manifest (tests/fixtures/MANIFEST.sha256): fails on any
## missing, extra or changed file. `python3 scripts/fixtures_manifest.py write` regenerates it.
FIXTURES_DIR ?= tests/fixtures
fixtures-check:
	python3 scripts/fixtures_manifest.py check $(FIXTURES_DIR)
