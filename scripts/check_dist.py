"""Checks every release artifact in a dist/ folder and fails loudly on the first problem.

Usage: check_dist.py DIST_DIR [--partial]

For each wheel:
  * its name: the project's version, and a tag this project builds (cp39-abi3 or cp314-cp314t);
  * the extension module inside agrees with the tag: ELF machine (x86-64, aarch64), Mach-O CPU
    type and minimum macOS version, PE machine (amd64, arm64), and the module's file name;
  * it carries remote stores (the object-store clients are in the module);
  * it exports PyInit__loaderx and links nothing outside the platform's allowed set: manylinux
    wheels need no glibc symbol version newer than 2.17, musllinux wheels only musl's libc,
    macOS wheels only system libraries, each import bound to its library by name, Windows wheels
    only system DLLs and python3.dll; no wheel links libpython;
  * contents: every Python file of the package, _loaderx.pyi, py.typed and both licence files.
The sdist must hold the Rust workspace it builds from; the npm tarball both wasm builds, the
types, the entry points, the viewer and the bins, and no tests, fixtures or node_modules.
Unless --partial, every platform in PLATFORMS (and FREE_THREADED), the sdist and the npm
tarball must be present.
"""

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import macholib.mach_o as mach_o
import pefile
from elftools.elf.elffile import ELFFile
from macholib.MachO import MachO

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "py" / "python" / "loaderx"

#: platform tag -> (binary format, machine, extension-module suffix for abi3)
PLATFORMS = {
    "manylinux_2_17_x86_64": ("elf", "EM_X86_64", ".abi3.so"),
    "manylinux_2_17_aarch64": ("elf", "EM_AARCH64", ".abi3.so"),
    "musllinux_1_2_x86_64": ("elf", "EM_X86_64", ".abi3.so"),
    "musllinux_1_2_aarch64": ("elf", "EM_AARCH64", ".abi3.so"),
    "macosx_11_0_x86_64": ("macho", 0x01000007, ".abi3.so"),
    "macosx_11_0_arm64": ("macho", 0x0100000C, ".abi3.so"),
    "win_amd64": ("pe", 0x8664, ".pyd"),
    "win_arm64": ("pe", 0xAA64, ".pyd"),
}
#: free-threaded wheels this project builds (platform tags)
FREE_THREADED = {"manylinux_2_17_x86_64", "manylinux_2_17_aarch64"}

# What a wheel's module may link against.
MANYLINUX_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}
MUSL_LIBS = {"libc.so", "libc.musl-x86_64.so.1", "libc.musl-aarch64.so.1"}
# A Windows wheel may import python3.dll (abi3), the API-set contracts (api-ms-win-*, which
# Windows resolves itself) and the DLLs that every supported Windows (10, 11, Server 2016 and
# later) installs in System32: each is the documented home of a Win32 API the Rust standard
# library or our dependencies call. crypt32 serves the TLS stack of remote reads (the system
# certificate store); bcryptprimitives serves std's random numbers (ProcessPrng). Runtime DLLs of
# a toolchain (libgcc_s_seh-1, libstdc++-6, libwinpthread-1, vcruntime140) are not in it: a
# user's machine need not have them.
WINDOWS_SYSTEM_DLLS = {
    "advapi32", "bcrypt", "bcryptprimitives", "crypt32", "iphlpapi", "kernel32", "msvcrt",
    "ncrypt", "ntdll", "ole32", "oleaut32", "secur32", "shell32", "ucrtbase", "user32", "userenv",
    "ws2_32",
}
WINDOWS_DLLS = re.compile(
    r"^(python3|api-ms-win-[a-z0-9-]+|" + "|".join(sorted(WINDOWS_SYSTEM_DLLS)) + r")\.dll$", re.I
)
# macOS ships its libraries in /usr/lib and /System (delocate's rule); anything else
# (/usr/local, /opt/homebrew, @rpath) would be missing on a user's machine.
MACOS_LIBS = re.compile(r"^(/usr/lib/[^/]+\.dylib|/System/Library/Frameworks/[^/]+\.framework/.+)$")
GLIBC_MAX = (2, 17)
# Strings only the object-store clients put in the module (S3 signing, Azure's API version
# header, GCS's host), and the words of the local-only builds' refusal of a URL.
REMOTE_MARKERS = (b"x-amz-content-sha256", b"x-ms-version", b"storage.googleapis.com")
LOCAL_ONLY = b"reads local stores only"


class Bad(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Bad(what)


def workspace_version():
    text = (REPO / "Cargo.toml").read_text()
    section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[)", text, re.S | re.M).group(1)
    return re.search(r'^version = "([^"]+)"', section, re.M).group(1)


# --- binaries ---------------------------------------------------------------------------------


def elf_facts(data):
    elf = ELFFile(io.BytesIO(data))
    needed, versions = [], []
    dynamic = elf.get_section_by_name(".dynamic")
    if dynamic is not None:
        needed = [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    verneed = elf.get_section_by_name(".gnu.version_r")
    if verneed is not None:
        for _, auxes in verneed.iter_versions():
            versions += [a.name for a in auxes]
    dynsym = elf.get_section_by_name(".dynsym")
    exports = set()
    if dynsym is not None:
        exports = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF" and s.name}
    return {"machine": elf.header["e_machine"], "needed": needed, "versions": versions, "exports": exports}


def macho_facts(path):
    m = MachO(str(path))
    check(len(m.headers) == 1, f"{path.name}: expected a thin Mach-O, got {len(m.headers)} slices")
    h = m.headers[0]
    minos, libs = None, []
    for lc, cmd, data in h.commands:
        if lc.cmd == mach_o.LC_BUILD_VERSION:
            minos = (cmd.minos >> 16, (cmd.minos >> 8) & 0xFF)
        elif lc.cmd == mach_o.LC_VERSION_MIN_MACOSX:
            minos = (cmd.version >> 16, (cmd.version >> 8) & 0xFF)
        elif lc.cmd in (mach_o.LC_LOAD_DYLIB, mach_o.LC_LOAD_WEAK_DYLIB, mach_o.LC_REEXPORT_DYLIB):
            libs.append(data.rstrip(b"\0").decode())
    # macholib does not read the export trie; llvm-nm (Debian's llvm) does, for any CPU.
    nm = subprocess.run(["llvm-nm", "--extern-only", "--defined-only", "--just-symbol-name", str(path)],
                        capture_output=True, text=True, check=True)
    exports = {s.lstrip("_") for s in nm.stdout.split()}
    # Imports bound to no library by name: looked up in every loaded image at load time. Only
    # Python's own API may be (the interpreter provides it; macOS modules link no libpython).
    nm = subprocess.run(["llvm-nm", "-m", "--undefined-only", str(path)], capture_output=True, text=True, check=True)
    flat = [line.split()[2] for line in nm.stdout.splitlines() if "(from " not in line]
    unbound = [s for s in flat if not s.startswith(("_Py", "__Py"))]
    return {"machine": h.header.cputype, "minos": minos, "needed": libs, "exports": exports, "unbound": unbound}


def pe_facts(data):
    pe = pefile.PE(data=data)
    imports = [e.dll.decode() for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", [])]
    exports = {s.name.decode() for s in getattr(pe, "DIRECTORY_ENTRY_EXPORT", None).symbols if s.name} \
        if hasattr(pe, "DIRECTORY_ENTRY_EXPORT") else set()
    return {"machine": pe.FILE_HEADER.Machine, "needed": imports, "exports": exports}


def check_module(name, data, platform, free_threaded):
    fmt, machine, suffix = PLATFORMS[platform]
    if free_threaded:
        arch = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}[machine]
        suffix = f".cpython-314t-{arch}-linux-gnu.so"
    check(name == f"loaderx/_loaderx{suffix}", f"module file is {name}, expected loaderx/_loaderx{suffix}")
    if fmt == "elf":
        check(data[:4] == b"\x7fELF", "module is not ELF")
        f = elf_facts(data)
        if platform.startswith("manylinux"):
            extra = set(f["needed"]) - MANYLINUX_LIBS
            check(not extra, f"links libraries outside the manylinux set: {sorted(extra)}")
            glibc = [tuple(int(x) for x in v[6:].split(".")[:2]) for v in f["versions"] if v.startswith("GLIBC_")]
            check(glibc, "no GLIBC symbol versions found (is this a glibc build?)")
            check(max(glibc) <= GLIBC_MAX, f"needs glibc {max(glibc)} > {GLIBC_MAX}")
        else:
            extra = set(f["needed"]) - MUSL_LIBS
            check(not extra, f"links libraries outside musl's libc: {sorted(extra)}")
            check(not any(v.startswith("GLIBC_") for v in f["versions"]), "musl module needs glibc versions")
        detail = f"glibc<={max(glibc)[0]}.{max(glibc)[1]}" if platform.startswith("manylinux") else "musl"
    elif fmt == "macho":
        check(data[:4] == b"\xcf\xfa\xed\xfe", "module is not a 64-bit Mach-O file")
        with tempfile.NamedTemporaryFile(suffix=".so") as tmp:
            tmp.write(data)
            tmp.flush()
            f = macho_facts(Path(tmp.name))
        check(f["minos"] is not None, "no minimum macOS version")
        want = tuple(int(x) for x in platform.split("_")[1:3])
        check(f["minos"] <= want, f"minimum macOS {f['minos']} is newer than the tag's {want}")
        bad = [lib for lib in f["needed"] if not MACOS_LIBS.match(lib)]
        check(not bad, f"links non-system libraries: {bad}")
        check(not f["unbound"], f"imports bound to no library (a link stub lacks them; see "
              f"scripts/zig/macos_frameworks.py): {f['unbound'][:8]}")
        detail = f"macOS>={f['minos'][0]}.{f['minos'][1]}"
    else:
        check(data[:2] == b"MZ", "module is not a PE file")
        f = pe_facts(data)
        bad = [d for d in f["needed"] if not WINDOWS_DLLS.match(d)]
        check(not bad, f"imports DLLs outside the system set: {bad}")
        detail = "dlls=" + ",".join(sorted({d.lower() for d in f["needed"]}))
    # Remote stores in every wheel: the S3, Azure and GCS clients are in the module, and the
    # refusal of a build without them is not.
    for marker in REMOTE_MARKERS:
        check(marker in data, f"lacks remote stores: no {marker.decode()!r} in the module")
    check(LOCAL_ONLY not in data, "is a local-only build (it refuses URLs)")
    check(f["machine"] == machine, f"machine {f['machine']!r}, expected {machine!r} for {platform}")
    check("PyInit__loaderx" in f["exports"], "PyInit__loaderx is not exported")
    check(not any("libpython" in lib.lower() or "Python.framework" in lib for lib in f["needed"]),
          f"links libpython: {f['needed']}")
    if free_threaded or fmt != "pe":
        check(not any(lib.lower().startswith("python3") for lib in f["needed"]), "links a Python DLL")
    return detail


# --- artifacts --------------------------------------------------------------------------------


def check_wheel(path, version):
    m = re.fullmatch(r"loaderx-([^-]+)-(cp\d+)-(abi3|cp\d+t)-(.+)\.whl", path.name)
    check(m, f"unexpected wheel name {path.name}")
    wver, py, abi, plats = m.groups()
    check(wver == version, f"version {wver} != workspace version {version}")
    free_threaded = abi.endswith("t")
    check((py, abi) in (("cp39", "abi3"), ("cp314", "cp314t")), f"unexpected tag {py}-{abi}")
    platform = next((p for p in plats.split(".") if p in PLATFORMS), None)
    check(platform, f"no known platform in {plats}")
    if free_threaded:
        check(platform in FREE_THREADED, f"free-threaded wheel for unexpected platform {platform}")
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        modules = [n for n in names if re.fullmatch(r"loaderx/_loaderx\..*(so|pyd)", n)]
        check(len(modules) == 1, f"expected one extension module, got {modules}")
        detail = check_module(modules[0], z.read(modules[0]), platform, free_threaded)
        want = {f"loaderx/{p.name}" for p in PACKAGE.iterdir() if p.suffix in (".py", ".pyi") or p.name == "py.typed"}
        missing = want - set(names)
        check(not missing, f"missing package files: {sorted(missing)}")
        licences = {Path(n).name for n in names if ".dist-info/" in n and "LICENSE" in n}
        check({"LICENSE-MIT", "LICENSE-APACHE"} <= licences, f"licence files missing (have {sorted(licences)})")
        check(not any("/tests/" in n or n.startswith("tests/") for n in names), "wheel holds tests")
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        check(f"\nVersion: {version}\n" in z.read(meta).decode(), "METADATA version differs")
    return platform, free_threaded, detail


def check_sdist(path, version):
    check(path.name == f"loaderx-{version}.tar.gz", f"unexpected sdist name {path.name}")
    with tarfile.open(path) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for need in ("pyproject.toml", "Cargo.toml", "PKG-INFO"):
        check(any(n == need or n.endswith("/" + need) for n in names), f"sdist lacks {need}")
    for crate in ("core/src/lib.rs", "native/src/lib.rs", "py/src/lib.rs"):
        check(any(n.endswith(crate) for n in names), f"sdist lacks {crate}")
    check(any(n.endswith("loaderx/dataloader.py") for n in names), "sdist lacks the Python package")
    check(not any("/target/" in n or n.startswith("target/") for n in names), "sdist holds build output")


def check_npm(path, version):
    package = json.loads((REPO / "js" / "package.json").read_text())
    check(path.name == f"loaderx-{version}.tgz", f"unexpected tarball name {path.name}")
    with tarfile.open(path) as t:
        names = {n.removeprefix("package/") for n in t.getnames()}
        inner = json.loads(t.extractfile("package/package.json").read())
    check(inner["version"] == version, "package.json version differs")
    need = [
        "pkg/names.js", "pkg/web/loaderx_wasm_bg.wasm", "pkg/web/loaderx_wasm.js",
        "pkg/threads/loaderx_wasm_bg.wasm", "pkg/threads/loaderx_wasm.js",
        "src/node.js", "src/browser.js", "viewer/index.html",
        "LICENSE-MIT", "LICENSE-APACHE", "README.md",
    ]
    need += [v.removeprefix("./") for v in package["bin"].values()]
    # Every file package.json points at (entry points and their declarations), and what the
    # declarations import.
    def targets(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, (dict, list)):
            for value in node.values() if isinstance(node, dict) else node:
                yield from targets(value)

    need += sorted({t.removeprefix("./") for t in targets([package["types"], package["exports"]]) if t.startswith("./src/")})
    need += ["src/common.d.ts"]
    missing = [n for n in need if n not in names]
    check(not missing, f"npm tarball lacks {missing}")
    bad = [n for n in names if re.search(r"(^|/)(test|tests|fixtures|node_modules)(/|$)", n)]
    check(not bad, f"npm tarball holds {bad[:5]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dist", type=Path)
    ap.add_argument("--partial", action="store_true", help="do not require every platform")
    args = ap.parse_args()
    version = workspace_version()
    failures, seen = [], set()
    files = sorted(args.dist.iterdir())
    check(files, f"{args.dist} is empty")
    for f in files:
        try:
            if f.suffix == ".whl":
                platform, ft, detail = check_wheel(f, version)
                seen.add((platform, ft))
                print(f"ok  {f.name}  [{detail}]")
            elif f.name.endswith(".tar.gz"):
                check_sdist(f, version)
                print(f"ok  {f.name}")
            elif f.suffix == ".tgz":
                check_npm(f, version)
                print(f"ok  {f.name}")
            else:
                raise Bad("unexpected file")
        except Exception as e:  # a Bad check, or a file the parsers cannot read
            failures.append(f"{f.name}: {e}")
            print(f"BAD {f.name}: {e}", file=sys.stderr)
    if not args.partial:
        want = {(p, False) for p in PLATFORMS} | {(p, True) for p in FREE_THREADED}
        for p, ft in sorted(want - seen):
            failures.append(f"missing {'cp314t' if ft else 'abi3'} wheel for {p}")
        for kind, pat in (("sdist", "*.tar.gz"), ("npm tarball", "*.tgz")):
            if not list(args.dist.glob(pat)):
                failures.append(f"missing {kind}")
    if failures:
        sys.exit("check_dist: FAILED\n  " + "\n  ".join(failures))
    print(f"check_dist: {len(files)} artifacts ok")


if __name__ == "__main__":
    main()
