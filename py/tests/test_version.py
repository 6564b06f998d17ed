"""One version everywhere: Cargo.toml's [workspace.package] version is what the Python package,
its metadata, `python -m loaderx --version`, the `loaderx` binary (when built) and the npm
package report."""

import importlib.metadata
import json
import re
import subprocess
import sys

import pytest

import loaderx
from _lxhelpers import REPO
from loaderx import _loaderx

pytestmark = pytest.mark.skipif(not (REPO / "Cargo.toml").exists(), reason="needs the source tree")


def workspace_version():
    text = (REPO / "Cargo.toml").read_text()
    section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[)", text, re.S | re.M)
    assert section, "Cargo.toml has no [workspace.package]"
    m = re.search(r'^version = "([^"]+)"', section.group(1), re.M)
    assert m, "[workspace.package] has no version"
    return m.group(1)


def test_the_python_package_reports_the_workspace_version():
    v = workspace_version()
    assert loaderx.__version__ == v
    assert _loaderx.__version__ == v
    assert importlib.metadata.version("loaderx") == v


def test_the_command_lines_report_the_workspace_version():
    v = workspace_version()
    out = subprocess.run([sys.executable, "-m", "loaderx", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"loaderx {v}"
    built = [p for p in (REPO / "target" / "release" / "loaderx", REPO / "target" / "debug" / "loaderx") if p.exists()]
    for binary in built:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == f"loaderx {v}", binary


def test_the_npm_package_mirrors_the_workspace_version():
    v = workspace_version()
    package = json.loads((REPO / "js" / "package.json").read_text())
    lock = json.loads((REPO / "js" / "package-lock.json").read_text())
    assert package["version"] == v, "run scripts/set_version.sh"
    assert lock["version"] == v and lock["packages"][""]["version"] == v, "run scripts/set_version.sh"
