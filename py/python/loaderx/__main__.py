"""``python -m loaderx``, and the ``loaderx`` command ``pip install`` puts on PATH: the
``loaderx`` command-line tool from the Python package.

It runs the native tool itself (``loaderx_native::cli`` in the extension), so its subcommands
(``info``, ``stats``, ``verify``, ``checksum``, ``compact``, ``head``, ``cat``, ``export``,
``convert``), options, output and exit codes are those of the ``loaderx`` binary: 0 success, 1 bad
records found (``verify``, ``checksum add``), 2 bad usage or a store that cannot be opened, read
or written.

Two subcommands are the Python package's own, since they replay the package's loader:
``receipt STEP RECEIPT.json [MASK] [--mask MASK|- ...] [--source STORE ...]`` prints, as JSON, the record indices every rank read at ``STEP`` of
the run a receipt describes (:mod:`loaderx.receipt`), and ``mix-preview CONFIG.json --steps
START:STOP:STEP`` prints each source's records per batch and share at those steps of a mix's
weights or schedule (:func:`loaderx.mix.preview`), so a schedule can be checked before a run.
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
    if args and args[0] == "mix-preview":
        return _mix_preview([os.fspath(a) for a in args[1:]])
    # Usage lines name the command as it was typed: `loaderx` or `python -m loaderx`.
    script = argv is None and os.path.splitext(os.path.basename(sys.argv[0]))[0] == "loaderx"
    # The tool writes to the process's stdout and stderr; what Python buffered goes first.
    sys.stdout.flush()
    sys.stderr.flush()
    return _loaderx.cli(["loaderx" if script else "python -m loaderx", *(os.fspath(a) for a in args)])


def _receipt(args: Sequence[str]) -> int:
    """``receipt STEP RECEIPT.json [MASK] [--mask MASK|- ...] [--source STORE ...]``: exit 0 with
    the indices as JSON, 2 on bad usage or a step the run did not consume. A masked run needs
    its mask file (a mix with masks per source one ``--mask`` per source, ``-`` for none); a
    packed run its sources (``--source``, in order)."""
    import json

    from .errors import ZrecordError
    from .receipt import indices

    usage = "usage: loaderx receipt STEP RECEIPT.json [MASK] [--mask MASK|- ...] [--source STORE ...]"
    positional: list[str] = []
    masks: list[str | None] = []
    sources: list[str] = []
    rest = list(args)
    while rest:
        a = rest.pop(0)
        if a in ("--mask", "--source"):
            if not rest:
                print(usage, file=sys.stderr)
                return 2
            value = rest.pop(0)
            if a == "--mask":
                masks.append(None if value == "-" else value)
            else:
                sources.append(value)
        else:
            positional.append(a)
    if len(positional) not in (2, 3) or not positional[0].isdigit() or (len(positional) == 3 and masks):
        print(usage, file=sys.stderr)
        return 2
    mask: object = positional[2] if len(positional) == 3 else (masks[0] if len(masks) == 1 else masks or None)
    try:
        with open(positional[1], encoding="utf-8") as f:
            receipt = json.load(f)
        datasets = None
        if sources:
            from .dataset import RaggedDataset

            datasets = [RaggedDataset(s) for s in sources]
        print(json.dumps(indices(receipt, int(positional[0]), mask, datasets)))
    except (OSError, ValueError, ZrecordError) as e:
        print(f"loaderx: {e}", file=sys.stderr)
        return 2
    return 0


def _mix_preview(args: Sequence[str]) -> int:
    """``mix-preview CONFIG.json [--steps START:STOP:STEP] [--json]``: each source's records per
    batch and share at those steps (default ``0:10001:1000``); exit 2 on bad usage or config."""
    import json

    from .errors import ZrecordError
    from .mix import preview

    usage = "usage: loaderx mix-preview CONFIG.json [--steps START:STOP:STEP] [--json]"
    rest, spec, as_json = list(args), "0:10001:1000", False
    if "--json" in rest:
        rest.remove("--json")
        as_json = True
    if "--steps" in rest:
        i = rest.index("--steps")
        if i + 1 >= len(rest):
            print(usage, file=sys.stderr)
            return 2
        spec = rest.pop(i + 1)
        rest.pop(i)
    parts = spec.split(":")
    if len(rest) != 1 or len(parts) not in (2, 3) or not all(p.isdigit() for p in parts) or (len(parts) == 3 and int(parts[2]) == 0):
        print(usage, file=sys.stderr)
        return 2
    steps = range(int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 1)
    try:
        with open(rest[0], encoding="utf-8") as f:
            out = preview(json.load(f), steps)
    except (OSError, ValueError, TypeError, ZrecordError) as e:
        print(f"loaderx: {e}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(out))
        return 0
    names, batch = out["sources"], out["batch_size"]
    width = max(8, *(len(n) for n in names))
    print("step".rjust(10) + "".join(n.rjust(width + 9) for n in names))
    for row in out["rows"]:
        cells = "".join(f"{c:>{width}} {100 * c / batch:6.2f}%" for c in row["counts"])
        print(f"{row['step']:>10}" + cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
