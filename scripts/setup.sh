#!/usr/bin/env bash
# Installs what the build and the tests need, skipping whatever is already there, so a second
# run costs seconds. Safe to run on a fresh machine of this kind (Debian 12, rustup, Python 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# clang builds zstd for wasm32 (gcc would leave env.* imports in the .wasm); chromium runs the
# browser tests; node/npm run the js package.
APT=()
command -v clang >/dev/null || APT+=(clang llvm)
command -v chromium >/dev/null || APT+=(chromium)
command -v npm >/dev/null || APT+=(nodejs npm)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || APT+=(nginx-light)
if [ ${#APT[@]} -gt 0 ]; then
  echo "setup: installing ${APT[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${APT[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
# The threaded wasm build: nightly with rust-src (-Z build-std) and the wasm32 target.
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "setup: installing the nightly toolchain"
  rustup toolchain install nightly --profile minimal
fi
if ! rustup +nightly component list --installed | grep -q '^rust-src'; then
  echo "setup: adding rust-src to nightly"
  rustup component add rust-src --toolchain nightly
fi
if ! rustup +nightly target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding wasm32-unknown-unknown to nightly"
  rustup target add wasm32-unknown-unknown --toolchain nightly
fi
# wasm-bindgen-cli must match the crate's pinned wasm-bindgen (=0.2.130); --locked fails.
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen 0.2.130" ]; then
  echo "setup: installing wasm-bindgen-cli 0.2.130 (about 4 minutes)"
  cargo install -q wasm-bindgen-cli --version 0.2.130
fi
# The js package's dev dependencies (playwright-core drives Debian's chromium, no browser download;
# fast-check runs the bad-input property tests).
# publint and @arethetypeswrong/cli check the packed tarball.
if [ ! -d js/node_modules/playwright-core ] || [ ! -d js/node_modules/fast-check ] ||
   [ ! -d js/node_modules/publint ] || [ ! -d js/node_modules/@arethetypeswrong/cli ]; then
  echo "setup: npm ci in js/"
  (cd js && npm ci --no-audit --no-fund --silent)
fi

# The reference implementation, in its own venv, for the interop tests.
if ! .venv-ref/bin/python -c "import loaderx, numpy" 2>/dev/null; then
  echo "setup: installing the reference loaderx 0.9.11 into .venv-ref"
  python3 -m venv .venv-ref
  .venv-ref/bin/pip install -q loaderx==0.9.11 numpy msgpack cffi
fi
# The project's own venv: build tools (maturin; zig from PyPI links the wheels of every
# platform), the artifact checker's parsers (ELF, Mach-O, PE), test and demo dependencies.
PY_DEPS="maturin ziglang pyelftools macholib pefile numpy msgpack pytest hypothesis tqdm scikit-learn moto[server] boto3 azure-storage-blob pyarrow polars duckdb datasets"
if ! .venv/bin/python -c "import maturin, ziglang, elftools, macholib, pefile, numpy, msgpack, pytest, tqdm, sklearn, hypothesis, moto, boto3, azure.storage.blob, pyarrow, polars, duckdb, datasets" 2>/dev/null; then
  echo "setup: installing into .venv: $PY_DEPS"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install -q -U pip
  .venv/bin/pip install -q $PY_DEPS
fi
# mypy's stubtest checks py/python/loaderx/_loaderx.pyi against the built extension (`make lint`).
# Pinned: a newer mypy may add checks, and the lint gate should change only when this line does.
MYPY_VERSION=2.4.1
if [ "$(.venv/bin/python -c 'import mypy.stubtest, mypy.version; print(mypy.version.__version__)' 2>/dev/null)" != "$MYPY_VERSION" ]; then
  echo "setup: installing mypy $MYPY_VERSION into .venv"
  .venv/bin/pip install -q "mypy==$MYPY_VERSION"
fi
# js/ dev dependencies added since the install above (typescript for `npm run typecheck` in
# `make lint`, ...): npm ci again whenever the lockfile is newer than node_modules' own record.
if [ ! -d js/node_modules/typescript ] || [ js/package-lock.json -nt js/node_modules/.package-lock.json ]; then
  echo "setup: npm ci in js/ (package-lock.json changed)"
  (cd js && npm ci --no-audit --no-fund --silent)
fi
# Azurite (Microsoft's Azure Storage emulator, from npm) for the az:// tests, kept outside the
# repository so a fresh clone on this machine reuses it. Pinned like the other tools.
AZURITE_DIR=$HOME/.cache/loaderx-tools/azurite
if [ ! -x "$AZURITE_DIR/node_modules/.bin/azurite-blob" ]; then
  echo "setup: installing azurite 3.37.0 into $AZURITE_DIR"
  mkdir -p "$AZURITE_DIR"
  (cd "$AZURITE_DIR" && npm install --no-audit --no-fund --silent azurite@3.37.0)
fi
# torch, torchdata, JAX (CPU), optax and Ray Data for loaderx.torch, loaderx.jax, loaderx.ray and
# the examples (make test-ml): about 7 GB with torch's CUDA wheels from PyPI, so in one venv
# outside the repository that every later run and fresh clone on this machine reuses. Pinned like
# the other tools.
ML_VENV=${LOADERX_ML_VENV:-$HOME/.cache/loaderx-tools/venv-ml}
ML_DEPS="torch==2.15.0 torchdata==0.11.0 jax[cpu]==0.10.2 optax==0.2.8 ray[data]==2.60.0 pyarrow==26.0.1 datasets numpy==2.4.6 scikit-learn==1.9.1 pytest hypothesis maturin"
if ! "$ML_VENV/bin/python" -c "import torch, torchdata.stateful_dataloader, jax, optax, ray.data, pyarrow, datasets, sklearn, pytest, hypothesis, maturin" 2>/dev/null; then
  echo "setup: installing torch, torchdata, jax[cpu], optax and Ray into $ML_VENV (about 2 minutes)"
  [ -x "$ML_VENV/bin/python" ] || python3 -m venv "$ML_VENV"
  "$ML_VENV/bin/pip" install -q -U pip
  "$ML_VENV/bin/pip" install -q $ML_DEPS
fi
echo "setup: ok"
