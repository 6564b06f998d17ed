#!/usr/bin/env bash
# Installs what the build and the tests need, skipping whatever is already there, so a second
# run costs seconds. Safe to run on a fresh machine of this kind (Debian 12, rustup, Python 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# clang builds zstd for wasm32 (gcc would leave env.* imports in the .wasm).
if ! command -v clang >/dev/null; then
  echo "setup: installing clang"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang llvm >/dev/null
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# The reference implementation, in its own venv, for the interop tests.
if ! .venv-ref/bin/python -c "import loaderx, numpy" 2>/dev/null; then
  echo "setup: installing the reference loaderx 0.9.11 into .venv-ref"
  python3 -m venv .venv-ref
  .venv-ref/bin/pip install -q loaderx==0.9.11 numpy msgpack cffi
fi
# The project's own venv: build tools, test and demo dependencies.
if ! .venv/bin/python -c "import maturin, numpy, msgpack, pytest, tqdm, sklearn" 2>/dev/null; then
  echo "setup: creating .venv (maturin, numpy, msgpack, pytest, tqdm, scikit-learn)"
  python3 -m venv .venv
  .venv/bin/pip install -q -U pip
  .venv/bin/pip install -q maturin numpy msgpack pytest tqdm scikit-learn
fi
echo "setup: ok"
