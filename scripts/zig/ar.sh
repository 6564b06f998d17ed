#!/bin/sh
# zig's archiver, for the C parts (zstd) of a Windows arm64 build (scripts/dist.sh).
exec "${MATURIN:-maturin}" zig ar -- "$@"
