"""The build scripts serve a new user's machine: they read cargo's output where cargo put it
(CARGO_TARGET_DIR, a common global setting, else target/), and `make demo` installs and builds
only what the demo uses.

Run: .venv/bin/python -m pytest tests/tooling -q   (make test-tooling)
"""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A fixed path into cargo's default output dir: `./target/release/...`, `$(CURDIR)/target/debug/...`,
# `target/wasm32-unknown-unknown/...`; not `$TARGET/release` (from CARGO_TARGET_DIR) nor an
# explicit `--target-dir target/threads`.
LITERAL_CARGO_OUTPUT = re.compile(r"(?<![\w-])target/(release|debug|wasm32-|x86_64-|aarch64-)")


def _scripts():
    folders = [REPO / "scripts", REPO / "js" / "scripts", REPO / "tests" / "golden"]
    files = [REPO / "Makefile"]
    for folder in folders:
        files += [p for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in {".sh", ".py", ".mjs", ".js", ""}]
    return files


def test_scripts_read_cargo_output_where_cargo_target_dir_puts_it():
    offenders = []
    for path in _scripts():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if LITERAL_CARGO_OUTPUT.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert len(_scripts()) > 10  # the scan saw the scripts
    assert not offenders, "cargo output read from a fixed target/ path:\n" + "\n".join(offenders)


def _plan(profile):
    out = subprocess.run(["bash", REPO / "scripts" / "setup.sh", "--plan", profile],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_the_demo_installs_only_what_the_demo_uses():
    demo, everything = _plan("demo"), _plan("all")
    assert demo == ["build_tools", "venv_demo"], demo
    # what the tests need and the demo does not
    for step in ("apt", "wasm_targets", "wasm_bindgen", "npm", "reference", "mypy", "azurite", "venv_ml"):
        assert step in everything and step not in demo, step
    # `make demo` runs the demo profile and builds only the Python extension: no full setup, no
    # wasm build, no separate native build.
    dry = subprocess.run(["make", "-n", "-C", REPO, "demo"], capture_output=True, text=True, check=True).stdout
    assert "setup.sh demo" in dry, dry
    assert "setup.sh all" not in dry and "build_wasm" not in dry and "cargo build" not in dry, dry
    assert "maturin develop" in dry and "scripts/demo.py" in dry, dry


def test_an_unknown_setup_profile_is_refused():
    r = subprocess.run(["bash", REPO / "scripts" / "setup.sh", "--plan", "everything"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown profile 'everything'" in r.stderr, r.stderr


def test_the_macos_link_stubs_export_what_the_tls_stack_imports(tmp_path):
    """scripts/zig/macos_frameworks.py reads the framework crates Cargo resolves for macOS and
    writes .tbd stubs under the frameworks' install names, with the functions, statics and
    macro-declared constants the crates bind (check_dist.py checks the linked module itself)."""
    import sys

    done = subprocess.run([sys.executable, str(REPO / "scripts/zig/macos_frameworks.py"), str(tmp_path), "aarch64-apple-darwin"],
                          capture_output=True, text=True, check=True)
    folder = Path(done.stdout.strip())
    assert folder.parent == tmp_path
    security = (folder / "Security.framework/Security.tbd").read_text()
    foundation = (folder / "CoreFoundation.framework/CoreFoundation.tbd").read_text()
    assert "install-name:    '/System/Library/Frameworks/Security.framework/Versions/A/Security'" in security
    assert "/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation" in foundation
    for name in ("_SecTrustEvaluateWithError", "_SecCertificateCreateWithData", "_kSecKeyAlgorithmRSASignatureMessagePSSSHA512"):
        assert re.search(rf"\b{name}\b", security), name
    for name in ("_CFRelease", "_kCFAllocatorDefault", "_CFArrayCreate"):
        assert re.search(rf"\b{name}\b", foundation), name
    # The same stubs land in the same folder (its name is their digest), so Cargo relinks only when they change.
    again = subprocess.run([sys.executable, str(REPO / "scripts/zig/macos_frameworks.py"), str(tmp_path), "aarch64-apple-darwin"],
                           capture_output=True, text=True, check=True)
    assert again.stdout.strip() == done.stdout.strip()
