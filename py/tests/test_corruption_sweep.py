"""A corrupt store never crashes or hangs the Python API: every read is a result or an exception.

The Python mirror of js/test/corruption.test.mjs, run on three small fixture stores: a raw one
(be_i4_raw), a zstd one (f16_zstd) and one with a dictionary and all three codec tags
(zrecord_mixed_codecs). Each store gets:

* every truncation length of meta.zr (0 .. its full size),
* every single-byte flip of meta.zr, XOR 0xFF and XOR 0x01,
* seeded random single-byte flips (XOR 1..255) in 0.zr and dict.zr, 2200 in all.

Each corrupted copy is opened through Zrecord and, since the fixtures have a schema, through
DenseDataset / RaggedDataset. Every record is read (len, lengths, gather, ``ds[:]``), and
verify(), stats() and has_dict() are called. The property: every step returns or raises an
``Exception``, and the interpreter never dies or hangs. The sweep of one store runs in a child
interpreter (this file run as a script, with a timeout), so a crash or a hang fails that store's
test and names the case being run, instead of killing the pytest session. The calls are still
the plain in-process API of that interpreter.

Outcomes are counted as *detected* (a step raised, or verify() listed a bad record),
*identical* (no complaint, and the same records as the pristine store), or *different* (no
complaint, other data). The format has no checksums (docs/format.md "Opening a store"), so some
undetected changes are unavoidable. A flipped payload byte of a raw record reads back changed.
So can a flipped literal inside a zstd frame or the dictionary's content, and so can a smaller
``length`` or a raw ``offset`` that still points inside 0.zr. Where the format does make
detection possible, it is asserted (see ``must_detect_meta``):

* a meta.zr cut short of ``16 + 16·length`` bytes (docs/format.md "Header" and "Opening a store"),
* a changed magic or version ("Header"),
* a ``length`` larger than the table (the fixtures' meta.zr is cut to exactly the table),
* a live entry whose chunk file does not exist, whose codec tag is not 0/1/2, whose logical
  length is outside 1..2^20, whose bytes run past the end of its chunk file, or a compressed
  entry whose logical length no longer matches its frame ("Table entry" and "Codecs").

Flips of an entry's reserved byte must read back identical ("written 0, ignored", "Table entry"), and a
flipped chunk byte that no live record covers can never change what is read.

With LOADERX_RELIABILITY_OUT=<dir>, the counts go to <dir>/py_corruption.json: inputs per store
and file kind, outcomes by class, per meta.zr field and per chunk region, and the exception types
seen. A one-line summary is printed at the end of the module.
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from _lxhelpers import OUR_PYTHON, STORES, clean_env, copy_fixture

#: store name -> {chunk-side file: number of random flips}
SWEEP = {
    "be_i4_raw": {"0.zr": 500},
    "f16_zstd": {"0.zr": 500},
    "zrecord_mixed_codecs": {"0.zr": 700, "dict.zr": 500},
}
#: The single-byte patterns applied at every position of meta.zr.
PATTERNS = (0xFF, 0x01)
SEED = 20240607
#: Per store. A sweep takes a few seconds; this only bounds a hang.
CHILD_TIMEOUT = 300
#: Never read more than this from a corrupted copy (a table could claim anything).
MAX_READ_RECORDS = 1 << 16
MAX_READ_BYTES = 256 << 20
MAX_RECORD_LEN = 1 << 20

META_FIELDS = [(0, 4, "magic"), (4, 6, "version"), (6, 8, "tail_chunk"), (8, 12, "tail_offset"), (12, 16, "length")]
ENTRY_FIELDS = [(0, 4, "offset"), (4, 8, "phys_length"), (8, 12, "logic_length"), (12, 14, "chunk_id"),
                (14, 15, "compress"), (15, 16, "reserved")]


# --- the format, as far as the assertions need it ---------------------------------------------

def parse_entry(e):
    """(offset, phys, logic, chunk, tag) of a 16-byte table entry."""
    return (int.from_bytes(e[0:4], "little"), int.from_bytes(e[4:8], "little"),
            int.from_bytes(e[8:12], "little"), int.from_bytes(e[12:14], "little"), e[14])


def parse_table(meta):
    """(length, [(offset, phys, logic, chunk, tag) per live entry]) of a meta.zr image."""
    length = int.from_bytes(meta[12:16], "little")
    count = min(length, max(len(meta) - 16, 0) // 16)
    return length, [parse_entry(meta[16 + 16 * i : 32 + 16 * i]) for i in range(count)]


def meta_field(pos):
    """The name of the meta.zr field byte ``pos`` belongs to."""
    if pos < 16:
        return next(name for lo, hi, name in META_FIELDS if lo <= pos < hi)
    return "entry." + next(name for lo, hi, name in ENTRY_FIELDS if lo <= (pos - 16) % 16 < hi)


def must_detect_meta(meta, table, pos, new_byte, chunk_sizes):
    """Why docs/format.md guarantees a reader can detect meta.zr (whose parsed ``table`` is given)
    with byte ``pos`` set to ``new_byte``, or None when it cannot (or need not).
    ``chunk_sizes``: chunk id -> size of the chunk files that exist."""
    old_len, old_entries = table
    if pos < 4:
        return "magic"
    if pos < 6:
        return "version"
    if pos < 12:
        return None  # tail_chunk / tail_offset: where the next append goes; no read needs them
    if pos < 16:
        header = bytearray(meta[12:16])
        header[pos - 12] = new_byte
        new_len = int.from_bytes(header, "little")
        if new_len > old_len and len(meta) == 16 + 16 * old_len:
            return "length beyond the table"
        return None  # a smaller length hides records: nothing to check it against
    i, f = divmod(pos - 16, 16)
    if i >= old_len:
        return None  # a stale entry
    entry = bytearray(meta[16 + 16 * i : 32 + 16 * i])
    entry[f] = new_byte
    offset, phys, logic, chunk, tag = parse_entry(entry)
    if f == 15:
        return None  # reserved: ignored on read (asserted identical instead)
    if chunk not in chunk_sizes:
        return "chunk file missing"
    if tag > 2:
        return "unknown codec tag"
    if not 1 <= logic <= MAX_RECORD_LEN:
        return "logical length outside 1..2^20"
    if offset + (logic if tag == 0 else phys) > chunk_sizes[chunk]:
        return "entry past the end of its chunk file"
    if tag in (1, 2) and logic != old_entries[i][2] and f in (8, 9, 10, 11):
        return "frame content size != logic_length"
    return None


def chunk_region(entries, chunk, pos):
    """What byte ``pos`` of chunk file ``chunk`` holds: raw / zstd / zstd_dict payload, or unused."""
    for offset, phys, logic, c, tag in entries:
        if c == chunk and offset <= pos < offset + (logic if tag == 0 else phys):
            return ("raw", "zstd", "zstd_dict")[tag] if tag <= 2 else "unknown"
    return "unused"


# --- the child: sweep one store -----------------------------------------------------------------

FAILED = object()


def exercise(store, kind):
    """Everything the Python API reads from ``store``. Returns (errors, view): errors is a list of
    (stage, exception type, is an Exception, is a ZrecordError), view what was read."""
    from loaderx.dataset import DenseDataset, RaggedDataset
    from loaderx.errors import ZrecordError
    from loaderx.zrecord import Zrecord

    errors, view = [], {}

    def stage(name, fn):
        try:
            return fn()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: B036 - a non-Exception is exactly what we look for
            errors.append((name, f"{type(e).__module__}.{type(e).__qualname__}", isinstance(e, Exception),
                           isinstance(e, ZrecordError)))
            return FAILED

    z = stage("open", lambda: Zrecord(store))
    if z is not FAILED:
        try:
            n = stage("len", lambda: len(z))
            view["n"] = n if n is not FAILED else None
            if n is not FAILED and n <= MAX_READ_RECORDS:
                idxs = np.arange(n, dtype=np.uint64)
                lens = stage("lengths", lambda: z.lengths(idxs))
                if lens is not FAILED:
                    view["lengths"] = tuple(int(v) for v in lens)
                    total = int(lens.astype(np.int64).sum())
                    if total <= MAX_READ_BYTES:
                        offs = np.zeros(n, dtype=np.uint64)
                        offs[1:] = np.cumsum(lens[:-1].astype(np.uint64))
                        buf = np.empty(total, dtype=np.uint8)
                        if stage("gather", lambda: z.gather(idxs, buf, offs)) is not FAILED:
                            view["data"] = hashlib.sha256(buf).hexdigest()
            v = stage("verify", z.verify)
            if v is not FAILED:
                view["verify_checked"], view["verify_bad"] = int(v[0]), len(v[1])
            stats = stage("stats", z.stats)
            view["stats"] = dict(stats) if stats is not FAILED else None
            stage("has_dict", z.has_dict)
        finally:
            stage("close", z.close)
    if kind is not None:
        cls = DenseDataset if kind == "dense" else RaggedDataset
        ds = stage("dataset open", lambda: cls(store))
        if ds is not FAILED:
            try:
                n = len(ds)
                if n <= MAX_READ_RECORDS and (view.get("lengths") is None or sum(view["lengths"]) <= MAX_READ_BYTES):
                    values = stage("dataset read", lambda: ds[:])
                    if values is not FAILED:
                        if kind == "dense":
                            view["dataset"] = (values.shape, hashlib.sha256(values.tobytes()).hexdigest())
                        else:
                            joined = b"".join(v.tobytes() for v in values)
                            view["dataset"] = (tuple(len(v) for v in values), hashlib.sha256(joined).hexdigest())
            finally:
                stage("dataset close", ds.close)
    return errors, view


def classify(errors, view, baseline):
    if errors or view.get("verify_bad"):
        return "detected"
    keys = ("n", "lengths", "data", "dataset")
    return "identical" if all(view.get(k) == baseline.get(k) for k in keys) else "different"


def _size_mtime(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


class Sweep:
    """One store's working copy, its pristine bytes, and the tallies."""

    def __init__(self, name, work):
        self.name = name
        self.kind = STORES[name]["kind"] if STORES[name].get("schema") else None
        self.store = copy_fixture(name, work / name)
        self.files = {f: (self.store / f).read_bytes() for f in sorted(os.listdir(self.store))}
        self.fds = {}
        self.errors, self.baseline = exercise(self.store, self.kind)
        self.table = parse_table(self.files["meta.zr"])
        self.length, self.entries = self.table
        self.chunk_sizes = {int(f[:-3]): len(b) for f, b in self.files.items() if f[:-3].isdigit() and f.endswith(".zr")}
        self.paths = {f: os.path.join(self.store, f) for f in self.files}
        self.inputs = Counter()
        self.outcomes = defaultdict(Counter)  # input kind -> outcome -> count
        self.meta_fields = defaultdict(Counter)
        self.chunk_regions = defaultdict(Counter)
        self.exceptions = Counter()
        self.detected_at = Counter()
        self.non_exceptions = []  # BaseExceptions that are not Exceptions (e.g. a Rust panic)
        self.must_detect = Counter()
        self.violations = []
        self.stats_only_changed = 0
        self.store_changed_by_reader = []

    def fd(self, name):
        if name not in self.fds:
            self.fds[name] = os.open(self.store / name, os.O_RDWR)
        return self.fds[name]

    def run_case(self, kind, label):
        """Exercise the store as it is now; tally the outcome under ``kind``."""
        print(label, file=sys.stderr, flush=True)  # the last line names the case if we die
        before = [_size_mtime(p) for p in self.paths.values()]
        errors, view = exercise(self.store, self.kind)
        after = [_size_mtime(p) for p in self.paths.values()]
        extra = sorted(set(os.listdir(self.store)) - set(self.files))
        if after != before or extra:
            self.store_changed_by_reader.append({"case": label, "new_files": extra})
            for f in extra:
                os.remove(self.store / f)
        outcome = classify(errors, view, self.baseline)
        self.inputs[kind] += 1
        self.outcomes[kind][outcome] += 1
        for stage, etype, is_exception, _ in errors:
            self.exceptions[etype] += 1
            if not is_exception:
                self.non_exceptions.append({"case": label, "stage": stage, "type": etype})
        if errors:
            self.detected_at[errors[0][0]] += 1
        elif outcome == "identical" and view.get("stats") != self.baseline.get("stats"):
            self.stats_only_changed += 1
        return outcome, errors

    def truncations(self):
        meta = self.files["meta.zr"]
        fd = self.fd("meta.zr")
        for n in range(len(meta) + 1):
            os.ftruncate(fd, n)
            outcome, errors = self.run_case("meta.zr truncation", f"{self.name}: meta.zr cut to {n} of {len(meta)}")
            if n < len(meta):
                self.check_detected(outcome, errors, f"meta.zr cut to {n} bytes", "short meta.zr")
            elif outcome != "identical":
                self.violations.append(f"the untouched meta.zr ({n} bytes) reads {outcome}: {errors[:2]}")
            os.pwrite(fd, meta[n:], n)  # back to full length

    def meta_flips(self, pattern):
        meta = self.files["meta.zr"]
        fd = self.fd("meta.zr")
        kind = f"meta.zr flip xor 0x{pattern:02x}"
        for pos in range(len(meta)):
            new = meta[pos] ^ pattern
            os.pwrite(fd, bytes([new]), pos)
            field = meta_field(pos)
            outcome, errors = self.run_case(kind, f"{self.name}: meta.zr byte {pos} ({field}) ^ 0x{pattern:02x}")
            self.meta_fields[field][outcome] += 1
            why = must_detect_meta(meta, self.table, pos, new, self.chunk_sizes)
            if why is not None:
                self.check_detected(outcome, errors, f"meta.zr byte {pos} ({field}) ^ 0x{pattern:02x}", why)
            if field == "entry.reserved" and pos < 16 + 16 * self.length and outcome != "identical":
                self.violations.append(
                    f"reserved byte {pos} ^ 0x{pattern:02x} read {outcome} (it is ignored on read): {errors[:2]}")
            os.pwrite(fd, meta[pos : pos + 1], pos)

    def random_flips(self, name, count):
        data = self.files[name]
        fd = self.fd(name)
        rng = random.Random(SEED ^ zlib.crc32(f"{self.name}/{name}".encode()))
        chunk = int(name.split(".")[0]) if name[0].isdigit() else None
        for _ in range(count):
            pos, mask = rng.randrange(len(data)), rng.randrange(1, 256)
            os.pwrite(fd, bytes([data[pos] ^ mask]), pos)
            region = "dict" if chunk is None else chunk_region(self.entries, chunk, pos)
            label = f"{self.name}: {name} byte {pos} ^ 0x{mask:02x} ({region})"
            outcome, errors = self.run_case(f"{name} random flip", label)
            self.chunk_regions[f"{name}:{region}"][outcome] += 1
            if region == "unused" and outcome == "different":
                self.violations.append(f"{name} byte {pos} is in no live record, yet the data changed")
            os.pwrite(fd, data[pos : pos + 1], pos)

    def check_detected(self, outcome, errors, case, why):
        self.must_detect[why] += 1
        if outcome != "detected":
            self.violations.append(f"{case}: {why}, yet it read {outcome}")
        elif errors and not all(is_zr for _, _, _, is_zr in errors):
            odd = [(stage, etype) for stage, etype, _, is_zr in errors if not is_zr]
            self.violations.append(f"{case}: {why}; detected, but not (only) as a ZrecordError: {odd[:3]}")

    def run(self):
        started = time.perf_counter()
        assert not self.errors and self.baseline.get("verify_bad") == 0, f"the pristine copy does not read: {self.errors}"
        self.truncations()
        for pattern in PATTERNS:
            self.meta_flips(pattern)
        for name, count in SWEEP[self.name].items():
            if name in self.files:
                self.random_flips(name, count)
        for fd in self.fds.values():
            os.close(fd)
        restored = {f: (self.store / f).read_bytes() for f in sorted(os.listdir(self.store))} == self.files
        final_errors, final = exercise(self.store, self.kind)
        return {
            "store": self.name,
            "kind": self.kind,
            "files": {f: len(b) for f, b in self.files.items()},
            "records": self.length,
            "inputs": dict(self.inputs),
            "outcomes": {k: dict(v) for k, v in self.outcomes.items()},
            "meta_fields": {k: dict(v) for k, v in self.meta_fields.items()},
            "chunk_regions": {k: dict(v) for k, v in self.chunk_regions.items()},
            "exceptions": dict(self.exceptions.most_common()),
            "detected_at": dict(self.detected_at.most_common()),
            "must_detect": dict(self.must_detect),
            "identical_but_stats_changed": self.stats_only_changed,
            "non_exceptions": self.non_exceptions[:20],
            "violations": self.violations[:50],
            "violation_count": len(self.violations),
            "store_changed_by_reader": self.store_changed_by_reader[:20],
            "restored": restored and not final_errors and classify(final_errors, final, self.baseline) == "identical",
            "seconds": round(time.perf_counter() - started, 2),
        }


def child_main(name, work):
    print(json.dumps(Sweep(name, Path(work)).run()))


# --- the tests ----------------------------------------------------------------------------------

_RESULTS = {}


def _summary_line(results):
    tot = Counter()
    for r in results.values():
        for counts in r["outcomes"].values():
            tot.update(counts)
    inputs = sum(sum(r["inputs"].values()) for r in results.values())
    secs = sum(r["seconds"] for r in results.values())
    return (f"py corruption sweep: {inputs} corrupted inputs over {len(results)} stores in {secs:.1f}s: "
            f"{tot['detected']} detected, {tot['identical']} identical, {tot['different']} undetected-different, "
            f"0 crashes, 0 hangs")


@pytest.fixture(scope="module")
def sweep_results(request):
    """Collects each store's counts; at the end writes py_corruption.json and prints a summary."""
    yield _RESULTS
    if not _RESULTS:
        return
    line = _summary_line(_RESULTS)
    out = os.environ.get("LOADERX_RELIABILITY_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        tot = Counter()
        for r in _RESULTS.values():
            for counts in r["outcomes"].values():
                tot.update(counts)
        doc = {
            "generated_by": "py/tests/test_corruption_sweep.py",
            "seed": SEED,
            "meta_patterns": [f"xor 0x{p:02x}" for p in PATTERNS],
            "random_flips": {name: files for name, files in SWEEP.items()},
            "stores": dict(sorted(_RESULTS.items())),
            "totals": {
                "inputs": sum(sum(r["inputs"].values()) for r in _RESULTS.values()),
                "outcomes": dict(tot),
                "exceptions": dict(sum((Counter(r["exceptions"]) for r in _RESULTS.values()), Counter()).most_common()),
                "crashes": 0,
                "hangs": 0,
            },
            "summary": line,
        }
        (Path(out) / "py_corruption.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print("\n" + line)
    else:
        print(line)


@pytest.mark.parametrize("name", sorted(SWEEP))
def test_corrupted_store_reads_or_raises(name, sweep_results):
    assert name in STORES, f"fixture {name} is not in the manifest"
    with tempfile.TemporaryDirectory(prefix="lx-corrupt-") as work:
        cmd = [OUR_PYTHON, "-X", "faulthandler", __file__, "--child", name, work]
        try:
            proc = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            pytest.fail(f"hang: the sweep of {name} did not finish in {CHILD_TIMEOUT}s; last cases:\n{err[-1500:]}")
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if ln.startswith(f"{name}: ")][-1:]
        pytest.fail(f"the interpreter died (exit {proc.returncode}) during {last}\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    sweep_results[name] = result

    assert not result["non_exceptions"], f"BaseExceptions that are not Exceptions escaped: {result['non_exceptions']}"
    assert result["violation_count"] == 0, (
        f"{result['violation_count']} corruptions the format makes detectable were not handled as such:\n"
        + "\n".join(result["violations"])
    )
    assert not result["store_changed_by_reader"], f"reading changed the store: {result['store_changed_by_reader']}"
    assert result["restored"], "the working copy was not restored (or no longer reads as the pristine store)"
    meta_size = result["files"]["meta.zr"]
    assert result["inputs"]["meta.zr truncation"] == meta_size + 1
    for p in PATTERNS:
        assert result["inputs"][f"meta.zr flip xor 0x{p:02x}"] == meta_size
    outcomes = Counter()
    for counts in result["outcomes"].values():
        outcomes.update(counts)
    assert outcomes["detected"] > 0 and outcomes["identical"] > 0, outcomes


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--child":
    child_main(sys.argv[2], sys.argv[3])
