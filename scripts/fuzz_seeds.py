"""Seed corpora for the fuzz targets, from the reference fixtures (stdlib only).

    python3 scripts/fuzz_seeds.py FIXTURES OUT     # writes OUT/<target>/<fixture>
"""

import struct
import sys
from pathlib import Path

fixtures, out = Path(sys.argv[1]), Path(sys.argv[2])
for target in ("format", "schema", "decode", "store", "image"):
    (out / target).mkdir(parents=True, exist_ok=True)

# Encoded images for the image target (core's test pictures), behind each crop's selector byte.
images = Path(__file__).resolve().parents[1] / "core" / "src" / "image" / "testdata"
for picture in sorted(images.iterdir()):
    for pick in (0, 4, 8):
        (out / "image" / f"{picture.name}-{pick}").write_bytes(bytes([pick]) + picture.read_bytes())


def read(p):
    return p.read_bytes() if p.is_file() else b""


for store in sorted(p / "store" for p in fixtures.iterdir() if (p / "store" / "meta.zr").is_file()):
    name = store.parent.name
    meta, dict_, schema, chunk = (read(store / f) for f in ("meta.zr", "dict.zr", "schema.msgpack", "0.zr"))
    (out / "format" / name).write_bytes(meta)
    if schema:
        (out / "schema" / name).write_bytes(schema)
    packed = b"".join(struct.pack("<H", len(f[:65535])) + f[:65535] for f in (meta, dict_, schema)) + chunk
    (out / "store" / name).write_bytes(packed)
    # A few records for the decoder: tag, 3-byte logical length, 2-byte dict length, dict, payload.
    length = struct.unpack_from("<I", meta, 12)[0] if len(meta) >= 16 else 0
    for i in range(min(length, 3)):
        off, phys, logic, _chunk, tag = struct.unpack_from("<IIIHB", meta, 16 + 16 * i)
        d = dict_ if tag == 2 else b""
        stored = chunk[off : off + (logic if tag == 0 else phys)]
        seed = bytes([tag]) + struct.pack("<I", logic - 1)[:3] + struct.pack("<H", len(d[:65535])) + d[:65535] + stored
        (out / "decode" / f"{name}-{i}").write_bytes(seed)
