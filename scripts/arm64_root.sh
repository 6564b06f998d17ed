#!/usr/bin/env bash
# Makes an arm64 Debian (bookworm) folder holding python3 and numpy, for running aarch64
# wheels under qemu user-mode emulation (qemu-aarch64 -L ROOT ROOT/usr/bin/python3 ...).
# apt resolves and downloads the arm64 packages with a private state and cache (the machine's
# own dpkg database is never touched), and each package is unpacked with dpkg -x. No
# maintainer scripts run; a Python interpreter and its modules need none.
# Usage: arm64_root.sh ROOT   (idempotent: an existing complete ROOT is kept)
set -euo pipefail
ROOT=$(realpath -m "${1:?usage: arm64_root.sh ROOT}")
[ -x "$ROOT/usr/bin/python3" ] && [ -f "$ROOT/.complete" ] && exit 0
command -v qemu-aarch64-static >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >/dev/null
}
APTDIR=$ROOT.apt
rm -rf "$ROOT" "$APTDIR"
mkdir -p "$APTDIR"/{lists/partial,archives/partial,etc/preferences.d,etc/apt.conf.d} "$ROOT"
touch "$APTDIR/status"
cat > "$APTDIR/etc/sources.list" <<SRC
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
SRC
opts=(
  -o "APT::Architecture=arm64" -o "APT::Architectures=arm64"
  -o "Dir::State=$APTDIR" -o "Dir::State::Lists=$APTDIR/lists" -o "Dir::State::status=$APTDIR/status"
  -o "Dir::Cache=$APTDIR" -o "Dir::Cache::archives=$APTDIR/archives"
  -o "Dir::Etc::SourceList=$APTDIR/etc/sources.list" -o "Dir::Etc::SourceParts=-"
  -o "Dir::Etc::Preferences=-" -o "Dir::Etc::PreferencesParts=$APTDIR/etc/preferences.d"
  -o "Dir::Etc::Parts=$APTDIR/etc/apt.conf.d"
  -o "APT::Install-Recommends=false" -o "Debug::NoLocking=true"
)
apt-get "${opts[@]}" update -qq
apt-get "${opts[@]}" install -y -qq --download-only libc6 python3 python3-numpy python3-msgpack >/dev/null
for deb in "$APTDIR"/archives/*.deb; do dpkg -x "$deb" "$ROOT"; done
# BLAS and LAPACK are chosen by update-alternatives in a postinst, which did not run: link the
# reference implementations where numpy's extension looks for them.
for lib in "$ROOT"/usr/lib/aarch64-linux-gnu/{blas,lapack}/lib*.so.3; do
  ln -sf "${lib#"$ROOT"/usr/lib/aarch64-linux-gnu/}" "$ROOT/usr/lib/aarch64-linux-gnu/$(basename "$lib")"
done
touch "$ROOT/.complete"
rm -rf "$APTDIR"
echo "arm64 root: $ROOT ($(du -sh "$ROOT" | cut -f1))"
