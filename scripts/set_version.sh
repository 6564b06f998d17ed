#!/usr/bin/env bash
# Sets the one loaderx version: Cargo.toml [workspace.package] (the crates, the CLI, the wheel
# and the wasm build read it from there) and its mirror in js/package.json (and the lock file).
# Usage: scripts/set_version.sh 0.11.0
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:?usage: scripts/set_version.sh VERSION}
[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+([-.+][0-9A-Za-z.-]+)?$ ]] || { echo "not a version: $v" >&2; exit 2; }
python3 - "$v" <<'PY'
import re, sys
p = "Cargo.toml"
s = open(p).read()
s2, n = re.subn(r'(\[workspace\.package\][^\[]*?\nversion = ")[^"]*(")', lambda m: m.group(1) + sys.argv[1] + m.group(2), s, count=1)
if n != 1:
    sys.exit("Cargo.toml: no version line under [workspace.package]")
open(p, "w").write(s2)
PY
(cd js && npm version --no-git-tag-version --allow-same-version "$v" >/dev/null)
echo "version: $v (Cargo.toml, js/package.json, js/package-lock.json)"
