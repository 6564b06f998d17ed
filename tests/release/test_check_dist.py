"""scripts/check_dist.py catches what it is there to catch: each test breaks one good artifact
from target/test-dist (made by scripts/test_wheel.sh) and expects the check to name the fault.

Run: .venv/bin/python -m pytest tests/release -q
"""

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "target" / "test-dist"
WHEELS = sorted(DIST.glob("loaderx-*-cp39-abi3-manylinux*_x86_64.whl"))
WIN_WHEELS = sorted(DIST.glob("loaderx-*-cp39-abi3-win_amd64.whl"))
TARBALLS = sorted(DIST.glob("loaderx-*.tgz"))
# scripts/test_wheel.sh builds these artifacts first; without them the suite fails, never skips.
assert WHEELS and WIN_WHEELS and TARBALLS, f"run scripts/test_wheel.sh first: {DIST} lacks the wheels or the tarball"


def check(folder):
    return subprocess.run([sys.executable, REPO / "scripts" / "check_dist.py", "--partial", folder],
                          capture_output=True, text=True)


def rewrite_zip(src, dst, drop=(), rename=None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if item.filename in drop:
                continue
            data = zin.read(item.filename)
            name = rename(item.filename) if rename else item.filename
            zout.writestr(name, data)


def test_the_good_artifacts_pass(tmp_path):
    shutil.copy(WHEELS[0], tmp_path)
    shutil.copy(WIN_WHEELS[0], tmp_path)
    shutil.copy(TARBALLS[0], tmp_path)
    r = check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_wheel_whose_tag_names_another_machine_fails(tmp_path):
    shutil.copy(WHEELS[0], tmp_path / WHEELS[0].name.replace("x86_64", "aarch64"))
    r = check(tmp_path)
    assert r.returncode != 0 and "machine 'EM_X86_64', expected 'EM_AARCH64'" in r.stderr, r.stderr


def test_a_wheel_for_macos_with_a_linux_module_fails(tmp_path):
    name = WHEELS[0].name.split("-cp39-abi3-")[0] + "-cp39-abi3-macosx_11_0_arm64.whl"
    shutil.copy(WHEELS[0], tmp_path / name)
    r = check(tmp_path)
    assert r.returncode != 0 and "not" in r.stderr, r.stderr


def test_a_wheel_without_py_typed_fails(tmp_path):
    rewrite_zip(WHEELS[0], tmp_path / WHEELS[0].name, drop={"loaderx/py.typed"})
    r = check(tmp_path)
    assert r.returncode != 0 and "loaderx/py.typed" in r.stderr, r.stderr


def test_a_wheel_of_another_version_fails(tmp_path):
    version = WHEELS[0].name.split("-")[1]
    shutil.copy(WHEELS[0], tmp_path / WHEELS[0].name.replace(version, "9.9.9"))
    r = check(tmp_path)
    assert r.returncode != 0 and "9.9.9" in r.stderr, r.stderr


def test_an_npm_tarball_with_tests_or_without_the_threaded_build_fails(tmp_path):
    src = TARBALLS[0]
    for case, keep in (("tests", lambda n: True), ("threads", lambda n: "pkg/threads/" not in n)):
        out = tmp_path / case
        out.mkdir()
        with tarfile.open(src) as tin, tarfile.open(out / src.name, "w:gz") as tout:
            for m in tin.getmembers():
                if keep(m.name):
                    tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
            if case == "tests":
                extra = tarfile.TarInfo("package/test/store.test.mjs")
                extra.size = 0
                tout.addfile(extra)
        r = check(out)
        assert r.returncode != 0, case
        assert ("test/store.test.mjs" in r.stderr) if case == "tests" else ("pkg/threads" in r.stderr), r.stderr


def test_the_windows_wheel_imports_only_system_dlls_and_a_toolchain_dll_fails(tmp_path):
    """The win_amd64 wheel (linked by mingw-w64, with the TLS stack of remote reads) passes, and
    the same wheel importing a toolchain runtime DLL in place of one of its system DLLs fails,
    naming it."""
    module = "loaderx/_loaderx.pyd"
    with zipfile.ZipFile(WIN_WHEELS[0]) as z:
        data = z.read(module)
    # Swap one imported system DLL's name for a mingw runtime DLL's name of the same length.
    swaps = [(system, runtime) for system, runtime in
             ((b"KERNEL32.dll", b"libgcc_s.dll"), (b"kernel32.dll", b"libgcc_s.dll"),
              (b"CRYPT32.dll", b"libssp0.dll"), (b"crypt32.dll", b"libssp0.dll")) if system in data]
    if not swaps:
        pytest.fail("the Windows module imports neither kernel32.dll nor crypt32.dll")
    system, runtime = swaps[0]
    broken = data.replace(system, runtime, 1)
    out = tmp_path / "broken"
    out.mkdir()
    with zipfile.ZipFile(WIN_WHEELS[0]) as zin, zipfile.ZipFile(out / WIN_WHEELS[0].name, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item, broken if item.filename == module else zin.read(item.filename))
    r = check(out)
    assert r.returncode != 0 and runtime.decode() in r.stderr and "outside the system set" in r.stderr, r.stderr
