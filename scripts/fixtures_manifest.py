"""The committed fixtures match their committed manifest of SHA-256 hashes (stdlib only).

    python3 scripts/fixtures_manifest.py check [DIR]   # fails on any missing, extra or changed file
    python3 scripts/fixtures_manifest.py write [DIR]   # regenerates DIR/MANIFEST.sha256

DIR defaults to tests/fixtures. The manifest lists every file below DIR but itself, sorted by
path, in the format of `sha256sum`, so `cd DIR && sha256sum -c MANIFEST.sha256` also checks it
(without noticing extra files). Regenerate it only when the fixtures change on purpose.
"""

import hashlib
import sys
from pathlib import Path

MANIFEST = "MANIFEST.sha256"


def hashes(root):
    """Relative POSIX path -> SHA-256 of every file below root, except the manifest."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == MANIFEST:
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            out[rel] = "not a regular file"
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def read_manifest(path):
    want = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel:
            sys.exit(f"{path}:{n}: not a `sha256sum` line: {line!r}")
        want[rel] = digest
    return want


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in ("check", "write"):
        sys.exit(__doc__)
    root = Path(sys.argv[2] if len(sys.argv) == 3 else "tests/fixtures")
    if not root.is_dir():
        sys.exit(f"fixtures: {root} is not a directory")
    have = hashes(root)
    manifest = root / MANIFEST
    if sys.argv[1] == "write":
        manifest.write_text("".join(f"{digest}  {rel}\n" for rel, digest in have.items()))
        print(f"fixtures: wrote {manifest} ({len(have)} files)")
        return
    if not manifest.is_file():
        sys.exit(f"fixtures: {manifest} missing (write it with: {sys.argv[0]} write {root})")
    want = read_manifest(manifest)
    problems = [f"missing: {rel}" for rel in sorted(want.keys() - have.keys())]
    problems += [f"extra (not in the manifest): {rel}" for rel in sorted(have.keys() - want.keys())]
    problems += [f"changed: {rel}" for rel in sorted(want.keys() & have.keys()) if want[rel] != have[rel]]
    if problems:
        print(f"fixtures: {root} does not match {manifest}:", *problems, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    print(f"fixtures: all {len(want)} files of {root} match {manifest}")


if __name__ == "__main__":
    main()
