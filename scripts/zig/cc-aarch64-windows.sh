#!/bin/sh
# zig as the C compiler and linker for aarch64-pc-windows-gnullvm (scripts/dist.sh). maturin's
# own --zig mode names the module's export with its dotted name on Windows and fails to link
# (`undefined symbol: PyInit_loaderx._loaderx`), so zig is handed to cargo directly.
exec "${MATURIN:-maturin}" zig cc -- -target aarch64-windows-gnu "$@"
