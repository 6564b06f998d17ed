"""A store's files as they would be uploaded: cut to their used length. Local store files are
sparse and full-size (a 4 GiB chunk file, a 256 MiB table), and the format reads trimmed files
the same way (see docs/format.md), so uploads send only the used bytes."""

from pathlib import Path


def trimmed_files(store):
    """(name, bytes) of each file of the store at ``store``, cut to its used length."""
    import struct

    with open(Path(store) / "meta.zr", "rb") as f:
        _magic, _version, tail_chunk, tail_offset, length = struct.unpack("<4sHHII", f.read(16))
    with open(Path(store) / "meta.zr", "rb") as f:
        yield "meta.zr", f.read(16 + 16 * length)
    for cid in range(tail_chunk + 1):
        with open(Path(store) / f"{cid}.zr", "rb") as f:
            yield f"{cid}.zr", f.read(tail_offset if cid == tail_chunk else 1 << 32)
    for name in ("schema.msgpack", "dict.zr"):
        if (Path(store) / name).is_file():
            yield name, (Path(store) / name).read_bytes()
    # checksums.lx: a 128-byte header, then 24 bytes per record.
    if (Path(store) / "checksums.lx").is_file():
        with open(Path(store) / "checksums.lx", "rb") as f:
            yield "checksums.lx", f.read(128 + 24 * length)
