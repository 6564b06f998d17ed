"""The typed script of the public API (py/tests/typing/usage.py, which `make lint` checks with
``mypy --strict``) runs as written, so the types it pins are those of real values."""

import importlib.util
from pathlib import Path


def test_typed_usage_script_runs(capsys):
    path = Path(__file__).parent / "typing" / "usage.py"
    spec = importlib.util.spec_from_file_location("loaderx_typed_usage", path)
    assert spec is not None and spec.loader is not None
    usage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(usage)
    assert usage.main() == 0
    assert capsys.readouterr().out == "usage: ok\n"
