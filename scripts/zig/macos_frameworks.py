"""Writes link stubs (text-based .tbd files) of the macOS frameworks the wheel links, for zig.

Usage: macos_frameworks.py OUT_DIR TARGET

The remote client checks server certificates with the system's trust store
(rustls-platform-verifier), which calls Security and CoreFoundation. zig links macOS binaries
without an Apple SDK, so it has no framework to link against. A .tbd stub is what Apple's own SDK
ships in place of each library: the library's install name and the symbols it exports. Linking
against a stub records a load command for the real framework (always present on macOS, in the
dyld shared cache) and binds each symbol to it by two-level name, exactly as an SDK link does.

The symbols come from the Rust crates that declare them (security-framework-sys and
core-foundation-sys, as Cargo.lock resolves them for TARGET): every function and static in their
`extern` blocks, and the constants their macros declare from `Name => kName,` pairs. A stub may list more than a binary uses; it never lists a name the framework
lacks, because these crates only bind functions Apple documents. scripts/check_dist.py checks
that the macOS module binds every symbol it imports to a library by name (only Python's own
API is looked up at load time).

Writes `<Name>.framework/<Name>.tbd` for each framework into OUT_DIR/<digest of the stubs> and
prints that folder, for the linker's `-F`: new stubs are a new folder, so the link flags change
and Cargo links again.
"""

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Rust crate -> (framework, its install name on every macOS since 10.x)
FRAMEWORKS = {
    "security-framework-sys": ("Security", "/System/Library/Frameworks/Security.framework/Versions/A/Security"),
    "core-foundation-sys": (
        "CoreFoundation", "/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation",
    ),
}
EXTERN_BLOCK = re.compile(r'\bextern\s+(?:"C"\s*)?\{')
DECLARATION = re.compile(r"\b(?:fn|static(?:\s+mut)?)\s+([A-Za-z_]\w*)")
# Constants a macro declares from `RustName => kCName,` pairs (security-framework-sys's key.rs).
MACRO_PAIR = re.compile(r"\b\w+\s*=>\s*(k[A-Z]\w*)\b")


def extern_names(source):
    """The names declared inside the `extern` blocks of one Rust source file."""
    names = set()
    for start in EXTERN_BLOCK.finditer(source):
        depth, i = 1, start.end()
        while depth and i < len(source):
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        names.update(DECLARATION.findall(source[start.end():i]))
    return names | set(MACRO_PAIR.findall(source))


def crate_dirs(target):
    """Each framework crate's source folder, as Cargo resolves the wheel's build for `target`."""
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--filter-platform", target,
         "--manifest-path", str(REPO / "py" / "Cargo.toml")],
        capture_output=True, text=True, check=True).stdout)
    dirs = {}
    for package in meta["packages"]:
        if package["name"] in FRAMEWORKS:
            dirs.setdefault(package["name"], []).append(Path(package["manifest_path"]).parent)
    missing = sorted(set(FRAMEWORKS) - set(dirs))
    if missing:
        sys.exit(f"macos_frameworks: {', '.join(missing)} not in the build for {target}")
    return dirs


def tbd(install_name, names, target_names):
    """A tbd-version 4 stub exporting `names` (C names, given an underscore as Mach-O does)."""
    targets = ", ".join(target_names)
    symbols = ",\n      ".join(f"_{n}" for n in sorted(names))
    return (
        "--- !tapi-tbd\n"
        "tbd-version:     4\n"
        f"targets:         [ {targets} ]\n"
        f"install-name:    '{install_name}'\n"
        "current-version: 1\n"
        "compatibility-version: 1\n"
        "exports:\n"
        f"  - targets:         [ {targets} ]\n"
        f"    symbols:         [ {symbols} ]\n"
        "...\n"
    )


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    out, target = Path(sys.argv[1]), sys.argv[2]
    stubs = {}
    for crate, folders in crate_dirs(target).items():
        name, install_name = FRAMEWORKS[crate]
        names = set()
        for folder in folders:
            for source in sorted((folder / "src").rglob("*.rs")):
                names |= extern_names(source.read_text())
        if len(names) < 20:
            sys.exit(f"macos_frameworks: only {len(names)} declarations found in {crate}; its layout changed")
        stubs[name] = tbd(install_name, names, ["x86_64-macos", "arm64-macos"])
        print(f"macos_frameworks: {name}.tbd with {len(names)} symbols", file=sys.stderr)
    folder = out / hashlib.sha256(json.dumps(stubs, sort_keys=True).encode()).hexdigest()[:12]
    for name, text in stubs.items():
        (folder / f"{name}.framework").mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.framework" / f"{name}.tbd").write_text(text)
    print(folder)


if __name__ == "__main__":
    main()
