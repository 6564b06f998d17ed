#!/usr/bin/env bash
# Installs what a make target needs, skipping whatever is already there, so a second run costs
# seconds. Safe to run on a fresh machine of this kind (Debian 12, rustup, Python 3.11).
#
#   scripts/setup.sh demo            what `make demo` needs (the steps in STEPS_demo)
#   scripts/setup.sh [all]           what `make test` needs (the steps in STEPS_all)
#   scripts/setup.sh --plan PROFILE  prints the steps PROFILE runs, one a line; installs nothing
#
# Each step is a function below that checks before it installs; a profile is a list of steps.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS_demo="build_tools venv_demo"
STEPS_all="build_tools venv_demo apt wasm_targets wasm_bindgen npm reference venv_test mypy ruff azurite venv_ml"

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# nasm assembles libjpeg-turbo's SIMD code, which the native engine decodes JPEGs with (core's
# `turbo` feature, through mozjpeg-sys); every native build needs it on x86.
build_tools() {
  if ! command -v nasm >/dev/null; then
    echo "setup: installing nasm"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq nasm >/dev/null
  fi
}

# The project's venv with what the build and the demo need: maturin builds the extension, the
# demo converts scikit-learn's digits and shows tqdm progress bars.
venv_demo() {
  local deps="maturin numpy tqdm scikit-learn"
  if ! .venv/bin/python -c "import maturin, numpy, tqdm, sklearn" 2>/dev/null; then
    echo "setup: installing into .venv: $deps"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install -q -U pip
    .venv/bin/pip install -q $deps
  fi
}

# clang builds zstd for wasm32 (gcc would leave env.* imports in the .wasm); chromium runs the
# browser tests; node/npm run the js package; nginx serves stores in the HTTP tests.
apt() {
  local pkgs=()
  command -v clang >/dev/null || pkgs+=(clang llvm)
  command -v chromium >/dev/null || pkgs+=(chromium)
  command -v npm >/dev/null || pkgs+=(nodejs npm)
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || pkgs+=(nginx-light)
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "setup: installing ${pkgs[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${pkgs[@]}" >/dev/null
  fi
}

# The plain wasm build (stable) and the threaded one (nightly with rust-src for -Z build-std).
wasm_targets() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    echo "setup: adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
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
}

# wasm-bindgen-cli must match the crate's pinned wasm-bindgen (=0.2.130); --locked fails.
wasm_bindgen() {
  if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen 0.2.130" ]; then
    echo "setup: installing wasm-bindgen-cli 0.2.130 (about 4 minutes)"
    cargo install -q wasm-bindgen-cli --version 0.2.130
  fi
}

# The js package's dev dependencies (playwright-core drives Debian's chromium, no browser
# download; fast-check, publint, @arethetypeswrong/cli, typescript), again whenever the lockfile
# is newer than node_modules' own record.
npm() {
  if [ ! -d js/node_modules/playwright-core ] || [ ! -d js/node_modules/typescript ] ||
     [ js/package-lock.json -nt js/node_modules/.package-lock.json ]; then
    echo "setup: npm ci in js/"
    (cd js && command npm ci --no-audit --no-fund --silent)
  fi
}

# The reference implementation, in its own venv, for the interop tests.
reference() {
  if ! .venv-ref/bin/python -c "import loaderx, numpy" 2>/dev/null; then
    echo "setup: installing the reference loaderx 0.9.11 into .venv-ref"
    python3 -m venv .venv-ref
    .venv-ref/bin/pip install -q loaderx==0.9.11 numpy msgpack cffi
  fi
}

# The test tools in the project's venv: zig from PyPI links the wheels of every platform, the
# artifact checker parses ELF, Mach-O and PE, and the suites' own dependencies.
venv_test() {
  local deps="ziglang pyelftools macholib pefile msgpack pytest hypothesis moto[server] boto3 azure-storage-blob pyarrow polars duckdb datasets pillow scikit-image"
  if ! .venv/bin/python -c "import ziglang, elftools, macholib, pefile, msgpack, pytest, hypothesis, moto, boto3, azure.storage.blob, pyarrow, polars, duckdb, datasets, PIL, skimage" 2>/dev/null; then
    echo "setup: installing into .venv: $deps"
    .venv/bin/pip install -q $deps
  fi
}

# mypy for `make lint` (stubtest and strict mode). Pinned: a newer mypy may add checks, and the
# lint gate should change only when this line does.
mypy() {
  local version=2.4.1
  if [ "$(.venv/bin/python -c 'import mypy.stubtest, mypy.version; print(mypy.version.__version__)' 2>/dev/null)" != "$version" ]; then
    echo "setup: installing mypy $version into .venv"
    .venv/bin/pip install -q "mypy==$version"
  fi
}

# ruff for `make lint` (the Python linter; config in py/pyproject.toml). Pinned like mypy.
ruff() {
  local version=0.17.5
  if [ "$(.venv/bin/ruff --version 2>/dev/null)" != "ruff $version" ]; then
    echo "setup: installing ruff $version into .venv"
    .venv/bin/pip install -q "ruff==$version"
  fi
}

# Azurite (Microsoft's Azure Storage emulator, from npm) for the az:// tests, kept outside the
# repository so a fresh clone on this machine reuses it. Pinned like the other tools.
azurite() {
  local dir=$HOME/.cache/loaderx-tools/azurite
  if [ ! -x "$dir/node_modules/.bin/azurite-blob" ]; then
    echo "setup: installing azurite 3.37.0 into $dir"
    mkdir -p "$dir"
    (cd "$dir" && command npm install --no-audit --no-fund --silent azurite@3.37.0)
  fi
}

# torch, torchvision, torchdata, JAX (CPU), optax and Ray Data for loaderx.torch, loaderx.jax, loaderx.ray and
# the examples (make test-ml): about 7 GB with torch's CUDA wheels from PyPI, so in one venv
# outside the repository that every later run and fresh clone on this machine reuses.
venv_ml() {
  local venv=${LOADERX_ML_VENV:-$HOME/.cache/loaderx-tools/venv-ml}
  local deps="torch==2.15.0 torchvision==0.29.2 torchdata==0.11.0 jax[cpu]==0.10.2 optax==0.2.8 ray[data]==2.60.0 pyarrow==26.0.1 datasets numpy==2.4.6 scikit-learn==1.9.1 scikit-image pillow pytest hypothesis maturin"
  if ! "$venv/bin/python" -c "import torch, torchvision, torchdata.stateful_dataloader, jax, optax, ray.data, pyarrow, datasets, sklearn, skimage, PIL, pytest, hypothesis, maturin" 2>/dev/null; then
    echo "setup: installing torch, torchdata, jax[cpu], optax and Ray into $venv (about 2 minutes)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q -U pip
    "$venv/bin/pip" install -q $deps
  fi
}

plan=0
if [ "${1:-}" = --plan ]; then plan=1; shift; fi
profile=${1:-all}
case $profile in
  demo) steps=$STEPS_demo ;;
  all) steps=$STEPS_all ;;
  *) echo "setup: unknown profile '$profile' (expected: demo or all)" >&2; exit 2 ;;
esac
for step in $steps; do
  if [ $plan = 1 ]; then echo "$step"; else "$step"; fi
done
[ $plan = 1 ] || echo "setup: ok ($profile)"
