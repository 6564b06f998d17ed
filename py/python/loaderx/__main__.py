"""``python -m loaderx``, and the ``loaderx`` command ``pip install`` puts on PATH: the
``loaderx`` command-line tool from the Python package.

It runs the native tool itself (``loaderx_native::cli`` in the extension), so its subcommands
(``info``, ``stats``, ``verify``, ``compact``, ``head``, ``cat``, ``export``, ``convert``), options,
output and exit codes are those of the ``loaderx`` binary: 0 success, 1 bad records found
(``verify``), 2 bad usage or a store that cannot be opened, read or written.
"""

import os
import sys
from typing import Optional, Sequence, Union

from . import _loaderx


def main(argv: Optional[Sequence[Union[str, "os.PathLike[str]"]]] = None) -> int:
    """Runs the tool on ``argv`` (default: ``sys.argv[1:]``) and returns its exit code. The
    ``loaderx`` command that ``pip install`` puts on PATH calls this too."""
    args = sys.argv[1:] if argv is None else list(argv)
    # Usage lines name the command as it was typed: `loaderx` or `python -m loaderx`.
    script = argv is None and os.path.splitext(os.path.basename(sys.argv[0]))[0] == "loaderx"
    # The tool writes to the process's stdout and stderr; what Python buffered goes first.
    sys.stdout.flush()
    sys.stderr.flush()
    return _loaderx.cli(["loaderx" if script else "python -m loaderx", *(os.fspath(a) for a in args)])


if __name__ == "__main__":
    sys.exit(main())
