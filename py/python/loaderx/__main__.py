"""``python -m loaderx``, and the ``loaderx`` command ``pip install`` puts on PATH: the
``loaderx`` command-line tool from the Python package.

It runs the native tool itself (``loaderx_native::cli`` in the extension), so its subcommands
(``info``, ``stats``, ``verify``, ``checksum``, ``compact``, ``head``, ``cat``, ``export``,
``convert``), options, output and exit codes are those of the ``loaderx`` binary: 0 success, 1 bad
records found (``verify``, ``checksum add``), 2 bad usage or a store that cannot be opened, read
or written.

One subcommand is the Python package's own, since it replays the package's loader: ``receipt
STEP RECEIPT.json`` prints, as JSON, the record indices every rank read at ``STEP`` of the run a
receipt describes (:mod:`loaderx.receipt`).
"""

import os
import sys
from typing import Optional, Sequence, Union

from . import _loaderx


def main(argv: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None) -> int:
    """Runs the tool on ``argv`` (default: ``sys.argv[1:]``) and returns its exit code. The
    ``loaderx`` command that ``pip install`` puts on PATH calls this too."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] == "receipt":
        return _receipt([os.fspath(a) for a in args[1:]])
    # Usage lines name the command as it was typed: `loaderx` or `python -m loaderx`.
    script = argv is None and os.path.splitext(os.path.basename(sys.argv[0]))[0] == "loaderx"
    # The tool writes to the process's stdout and stderr; what Python buffered goes first.
    sys.stdout.flush()
    sys.stderr.flush()
    return _loaderx.cli(["loaderx" if script else "python -m loaderx", *(os.fspath(a) for a in args)])


def _receipt(args: Sequence[str]) -> int:
    """``receipt STEP RECEIPT.json``: exit 0 with the indices as JSON, 2 on bad usage or a step
    the run did not consume."""
    import json

    from .errors import ZrecordError
    from .receipt import indices

    if len(args) != 2 or not args[0].isdigit():
        print("usage: loaderx receipt STEP RECEIPT.json", file=sys.stderr)
        return 2
    try:
        with open(args[1], encoding="utf-8") as f:
            receipt = json.load(f)
        print(json.dumps(indices(receipt, int(args[0]))))
    except (OSError, ValueError, ZrecordError) as e:
        print(f"loaderx: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
