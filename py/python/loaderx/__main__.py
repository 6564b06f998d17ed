"""``python -m loaderx``: the ``loaderx`` command-line tool from the Python package.

It runs the native tool itself (``loaderx_native::cli`` in the extension), so its subcommands
(``info``, ``stats``, ``verify``, ``compact``, ``head``, ``cat``, ``export``, ``convert``), options,
output and exit codes are those of the ``loaderx`` binary: 0 success, 1 bad records found
(``verify``), 2 bad usage or a store that cannot be opened, read or written.
"""

import os
import sys

from . import _loaderx


def main(argv=None):
    """Runs the tool on ``argv`` (default: ``sys.argv[1:]``) and returns its exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    # The tool writes to the process's stdout and stderr; what Python buffered goes first.
    sys.stdout.flush()
    sys.stderr.flush()
    return _loaderx.cli(["python -m loaderx", *(os.fspath(a) for a in args)])


if __name__ == "__main__":
    sys.exit(main())
