"""Shared helpers for the loaderx Python test suite (imported by the test modules).

Paths, the fixture manifest, subprocess runners for our interpreter and the reference's, a
sparse-file-aware snapshot of a store directory, and deterministic record generators.
"""

import contextlib
import errno
import hashlib
import json
import os
import shutil
import ssl
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parents[1]
SCRIPTS = TESTS / "scripts"
FIXTURES = REPO / "tests" / "fixtures" / "v3"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
STORES = {s["name"]: s for s in MANIFEST["stores"]}

#: The interpreter our package is installed in (run as a subprocess for parity checks): the one
#: running the tests, so a run against an installed wheel tests that wheel throughout.
OUR_PYTHON = sys.executable

REF_CANDIDATES = [REPO / ".venv-ref" / "bin" / "python", Path("/tmp/refvenv/bin/python")]


def find_ref_python():
    """The reference interpreter: $LOADERX_REF_PYTHON when set (None if it does not exist),
    else the first known venv that exists; or None."""
    env = os.environ.get("LOADERX_REF_PYTHON")
    candidates = [Path(env)] if env else REF_CANDIDATES
    for c in candidates:
        if c.exists() and os.access(c, os.X_OK):
            return str(c)
    return None


def clean_env(**extra):
    """The environment for a child interpreter: no PYTHONPATH (so each venv sees only its own
    loaderx), no inherited PYTHONHOME, and one OpenMP thread.

    ``OMP_NUM_THREADS=1`` is for the reference: loaderx 0.9.11 crashes with SIGSEGV now and then
    in its multi-threaded (OpenMP) zstd gather of variable-length records (see
    docs/reference-defects.md). Our own package does not use OpenMP, so the setting changes
    nothing for it; setting it for every child keeps each reference run pinned.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["OMP_NUM_THREADS"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(python, args, cwd=None, timeout=120, check=True):
    """Run ``python args...``; return the CompletedProcess. On failure, the assertion carries
    the child's stderr."""
    proc = subprocess.run(
        [python, *map(str, args)],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{python} {' '.join(map(str, args))} exited with {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-8000:]}"
        )
    return proc


def run_json(python, args, cwd=None, timeout=120):
    """Run a script that prints one JSON document as its last stdout line; return it."""
    proc = run_python(python, args, cwd=cwd, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, f"no output from {args}; stderr:\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1])


def run_code(python, code, cwd=None, timeout=60, check=True):
    """Run a code string in a fresh interpreter."""
    return run_python(python, ["-c", code], cwd=cwd, timeout=timeout, check=check)


def copy_store(src, dst):
    """Copy a store directory (e.g. a read-only fixture) and make the copy writable."""
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for name in dirs + files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    os.chmod(dst, os.stat(dst).st_mode | stat.S_IWUSR)
    return Path(dst)


def copy_fixture(name, dst):
    return copy_store(FIXTURES / STORES[name]["store"], dst)


def _data_regions(fd, size):
    """(offset, length) of the data (non-hole) regions of a file."""
    regions = []
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                break
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        regions.append((start, end - start))
        off = end
    return regions


def file_digest(path):
    """(apparent size, sha256 of every data region with its offset). Holes of sparse files are
    skipped, so a 4 GiB chunk file costs only its written bytes."""
    st = os.stat(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        fd = f.fileno()
        try:
            regions = _data_regions(fd, st.st_size)
        except OSError:
            regions = [(0, st.st_size)]
        for start, length in regions:
            f.seek(start)
            left = length
            while left:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                # Zero blocks inside a data region and holes read the same; hash content only
                # where it is non-zero so allocation granularity does not matter.
                if block.count(0) != len(block):
                    h.update(start.to_bytes(8, "little") + (length - left).to_bytes(8, "little"))
                    h.update(block)
                left -= len(block)
    return st.st_size, h.hexdigest()


def snapshot(directory):
    """Every file under ``directory`` (relative name -> (size, content digest)); None if the
    directory does not exist."""
    directory = Path(directory)
    if not directory.exists():
        return None
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(directory))] = file_digest(p)
    return out


def used_bytes_digest(store):
    """sha256 of what a store really holds: the header plus the live table (16 + 16 * length
    bytes of meta.zr) and, per chunk file, the bytes below its used end. Byte 15 of each entry
    (reserved: 0 from the reference, 1 from loaderx 0.10, which marks the entries it wrote
    checksums for; docs/format.md) is taken as 0."""
    store = Path(store)
    with open(store / "meta.zr", "rb") as f:
        header = f.read(16)
        length = int.from_bytes(header[12:16], "little")
        table = bytearray(f.read(16 * length))
        table[15::16] = bytes(len(table[15::16]))
        table = bytes(table)
    tail_chunk = int.from_bytes(header[6:8], "little")
    tail_offset = int.from_bytes(header[8:12], "little")
    h = hashlib.sha256(header + table)
    for k in range(tail_chunk + 1):
        with open(store / f"{k}.zr", "rb") as f:
            h.update(f.read(tail_offset if k == tail_chunk else (1 << 32) - 1))
    return h.hexdigest()


def read_records(z):
    """Every record of an open Zrecord, as bytes, in index order, read in one gather."""
    n = len(z)
    if n == 0:
        return []
    lens = z.lengths(np.arange(n, dtype=np.uint64)).astype(np.int64)
    offs = np.zeros(n, dtype=np.uint64)
    offs[1:] = np.cumsum(lens[:-1])
    buf = np.empty(int(lens.sum()), dtype=np.uint8)
    z.gather(np.arange(n, dtype=np.uint64), buf, offs)
    return [buf[int(o) : int(o) + int(k)].tobytes() for o, k in zip(offs, lens)]


def swap_last_delete(items, idxs):
    """docs/format.md "Delete and compact", modelled independently of the engine: duplicates
    dropped, largest index first, each hole filled by the last item."""
    items = list(items)
    for i in sorted(set(idxs), reverse=True):
        items[i] = items[-1]
        items.pop()
    return items


def table_codecs(store):
    """The compress tag of every live table entry, read straight from meta.zr
    (docs/format.md "Table entry")."""
    with open(Path(store) / "meta.zr", "rb") as f:
        header = f.read(16)
        length = int.from_bytes(header[12:16], "little")
        table = np.frombuffer(f.read(16 * length), dtype=np.uint8).reshape(length, 16)
    return table[:, 14].copy()


def record(i, size):
    """Deterministic content of record ``i``: its index as 4 little-endian bytes, then a
    pattern that depends on ``i`` (compressible, but different for every record)."""
    body = (np.arange(size, dtype=np.int64) * (i % 13 + 1) // 5 + i * 7) % 251
    out = body.astype(np.uint8)
    out[:4] = np.frombuffer(int(i).to_bytes(4, "little"), dtype=np.uint8)[: min(4, size)]
    return out


def records(start, count, size):
    return np.stack([record(i, size) for i in range(start, start + count)])


def worker_threads():
    """Live threads started by a DataLoader (their names start with ``loaderx-worker``)."""
    return [t for t in threading.enumerate() if t.name.startswith("loaderx-worker") and t.is_alive()]


def expected_path(name, key):
    """Path of a fixture's expected/*.npy file (``values``, ``lengths``, ``row_splits``...)."""
    return FIXTURES / STORES[name]["expected"][key]


def spawn_read(blob):
    """Runs in a spawned process: unpickle datasets, a store and a sampler, and read them."""
    import pickle

    objs = pickle.loads(blob)
    ds, rs, z, sampler = objs["ds"], objs["rs"], objs["z"], objs["sampler"]
    dst = np.zeros(int(z.lengths([10])[0]), dtype=np.uint8)
    z.gather([10], dst, [0])
    rag = rs[[0, -1]]
    return {
        "ds": ds[[3, -1, 0]],
        "ds_len": len(ds),
        "ds_dtype": str(ds.dtype),
        "rs": [r.tolist() for r in rag],
        "rs_dtype": str(rag[0].dtype),
        "z": dst.tobytes(),
        "sampler": [sampler.next() for _ in range(3)],
    }


def fixture_names():
    """The reference fixtures that hold a store."""
    return sorted(e.name for e in FIXTURES.iterdir() if (e / "store" / "meta.zr").is_file())


def assert_reads_like_local(local, remote, seed):
    """``remote`` (a Zrecord opened by URL) holds what ``local`` holds: length, stats, and the
    bytes and lengths of up to 300 records in a random order."""
    import numpy as np

    assert remote.engine.remote and len(remote) == len(local)
    n = len(local)
    if n == 0:
        return
    idxs = np.random.default_rng(seed).permutation(n)[: min(n, 300)]
    lens = local.lengths(idxs)
    assert remote.lengths(idxs).tolist() == lens.tolist()
    offs = np.concatenate([[0], np.cumsum(lens.astype(np.uint64))[:-1]]).astype(np.uint64)
    a, b = np.empty(int(lens.sum()), np.uint8), np.full(int(lens.sum()), 0xAB, np.uint8)
    local.gather(idxs, a, offs)
    remote.gather(idxs, b, offs)
    assert np.array_equal(a, b)
    assert remote.stats() == local.stats() and remote.has_dict() == local.has_dict()


def free_port():
    """A TCP port on 127.0.0.1 nothing listens on (for a server a test starts)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_s3(buckets=("stores",)):
    """moto's S3 server on 127.0.0.1 (from the moto[server] package), with ``buckets`` made and
    the AWS_* environment set for it while the block runs; yields ``(endpoint, boto3 client)``."""
    import time

    import boto3

    server = Path(sys.executable).with_name("moto_server")
    if not server.exists():
        import pytest

        pytest.skip("moto_server is not installed")
    port = free_port()
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
        for bucket in buckets:
            for _ in range(100):
                try:
                    client.create_bucket(Bucket=bucket)
                    break
                except Exception:
                    time.sleep(0.1)
        yield endpoint, client
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def tls_certificates(folder):
    """A certificate authority and a server certificate it signed for 127.0.0.1, made with the
    openssl command line in ``folder``: a dict of the PEM paths ``ca``, ``cert`` and ``key``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, ext = folder / "server.pem", folder / "server.key", folder / "server.ext"

    def openssl(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=loaderx test CA",
            "-keyout", ca_key, "-out", ca)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", folder / "server.csr")
    ext.write_text("subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n")
    openssl("x509", "-req", "-in", folder / "server.csr", "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-days", "2", "-extfile", ext, "-out", cert)
    return {"ca": ca, "cert": cert, "key": key}


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@contextlib.contextmanager
def nginx_serving(conf, server, probe, tls=None):
    """Runs nginx (:data:`NGINX`) on a free 127.0.0.1 port with ``server`` (the directives of its
    one server block besides ``listen``), its config, temp and pid files under ``conf``; yields the
    base URL once ``probe`` (a path) answers, and stops the server after. ``tls``, a
    :func:`tls_certificates` result, serves HTTPS with its server certificate."""
    port = free_port()
    if tls is not None:
        server = f"        ssl_certificate {tls['cert']};\n        ssl_certificate_key {tls['key']};\n{server}"
    temps = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    for sub in temps:
        (conf / sub).mkdir()
    paths = "\n".join(f"    {sub}_temp_path {conf}/{sub};" for sub in temps)
    # As root, nginx's workers would run as nobody and could not read pytest's private tmp dirs.
    user = "user root root;" if os.geteuid() == 0 else ""
    (conf / "nginx.conf").write_text(
        f"daemon off;\n{user}\npid {conf}/nginx.pid;\nerror_log {conf}/error.log;\n"
        f"events {{ worker_connections 64; }}\nhttp {{\n    access_log off;\n{paths}\n"
        f"    server {{\n        listen 127.0.0.1:{port}{' ssl' if tls else ''};\n{server}\n    }}\n}}\n"
    )
    proc = subprocess.Popen([NGINX, "-p", str(conf), "-e", str(conf / "error.log"), "-c", str(conf / "nginx.conf")])
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    context = ssl.create_default_context(cafile=str(tls["ca"])) if tls else None
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + probe, timeout=1, context=context)
                break
            except OSError:
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
