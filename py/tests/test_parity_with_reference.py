"""The same API calls give the same results under ours and under the reference 0.9.11.

scripts/parity_cases.py runs once under each interpreter (separate processes, PYTHONPATH unset)
and prints JSON. Pinned as identical: Zrecord append/gather/lengths/stats/has_dict, the delete
orders (docs/format.md "Delete and compact") and compact, the bytes of every store the converters
write (schema.msgpack, meta.zr table, chunk bytes, dict.zr) for many dtypes and all codecs,
every DenseDataset / RaggedDataset indexing form, SEQUENTIAL sampler batches and seeks, and the
first batches of a one-worker SEQUENTIAL DataLoader. IID/CYCLIC streams may differ, but only in
values, not in shape rules. Where the reference raises, ours raises an instance of the same class
names (ours are subclasses: ZrecordError that is also IndexError, ...) with the same ``code``.
"""

import msgpack
import numpy as np
import pytest

from _lxhelpers import OUR_PYTHON, SCRIPTS, run_json

# docs/format.md "Delete and compact": deleting from records 0..5, the resulting order.
FORMAT_DELETE_TABLE = {
    "[1, 3]": [0, 4, 2, 5],
    "[3, 1]": [0, 4, 2, 5],
    "[1, 1, 3]": [0, 4, 2, 5],
    "[1, 3, 3, 1]": [0, 4, 2, 5],
    "[0]": [5, 1, 2, 3, 4],
    "[5]": [0, 1, 2, 3, 4],
    "[0, 5]": [4, 1, 2, 3],
    "[5, 0]": [4, 1, 2, 3],
    "[2, 4]": [0, 1, 5, 3],
    "[4, 5]": [0, 1, 2, 3],
    "[0, 1, 2, 3, 4, 5]": [],
}


@pytest.fixture(scope="module")
def results(ref_python, tmp_path_factory):
    script = SCRIPTS / "parity_cases.py"
    ref = run_json(ref_python, [script, tmp_path_factory.mktemp("parity-ref")])
    ours = run_json(OUR_PYTHON, [script, tmp_path_factory.mktemp("parity-ours")])
    assert ref["version"] == "0.9.11", "the reference interpreter does not run loaderx 0.9.11"
    assert ours["version"] != "0.9.11", "the 'ours' interpreter imported the reference"
    return ours, ref


def _no_error(value):
    assert not (isinstance(value, dict) and "error" in value and "code" in value), value


def test_zrecord_delete_orders_match_reference_and_format_table(results):
    ours, ref = results
    _no_error(ours["zrecord_delete_orders"])
    _no_error(ref["zrecord_delete_orders"])
    assert ours["zrecord_delete_orders"] == ref["zrecord_delete_orders"]
    for pattern, want in FORMAT_DELETE_TABLE.items():
        got = ours["zrecord_delete_orders"][pattern]
        assert got["order"] == want, pattern
        assert got["order_after"] == want, pattern  # compact keeps indices
        assert got["compacted"]["reclaimable"] == 0
        assert got["compacted"]["records"] == len(want)


def test_zrecord_append_gather_lengths_stats_dict_compact(results):
    ours, ref = results
    _no_error(ours["zrecord_ops"])
    assert ours["zrecord_ops"] == ref["zrecord_ops"]
    r = ours["zrecord_ops"]
    assert (r["first1"], r["first2"], r["first3"]) == (0, 5, 9)
    assert r["has_dict0"] is False and r["has_dict1"] is True and r["has_dict_reopened"] is True
    assert r["stats4"]["reclaimable"] == 0 and r["stats3"]["reclaimable"] > 0
    assert r["content"] == r["reopened"]


@pytest.mark.parametrize(
    "name", ["u8_raw", "u8_zstd", "u8_zstd_dict", "f32_zstd", "i64_1d", "bool", "f16", "be_i4", "c8", "U2", "M8", "V12", "V5x2"]
)
def test_from_numpy_writes_identical_stores(results, name):
    ours, ref = results
    _no_error(ours["converters_from_numpy"])
    _no_error(ref["converters_from_numpy"])
    o, r = ours["converters_from_numpy"][name], ref["converters_from_numpy"][name]
    assert o["schema"] == r["schema"], "schema.msgpack bytes differ"
    assert o["used"] == r["used"], "meta.zr table or chunk bytes differ"
    assert o.get("dict") == r.get("dict"), "dict.zr differs"
    assert o == r
    assert o["roundtrip"] is True


def test_schema_bytes_follow_format_doc(results):
    """docs/format.md "schema.msgpack": key order, str types and the documented dtype strings."""
    ours, _ = results
    conv = ours["converters_from_numpy"]
    want_dtype = {"u8_raw": "|u1", "f32_zstd": "<f4", "i64_1d": "<i8", "bool": "|b1", "f16": "<f2", "be_i4": ">i4",
                  "c8": "<c8", "U2": "<U2", "M8": "<M8[s]", "V12": "|V12", "V5x2": "|V5"}
    for name, dtype in want_dtype.items():
        schema = msgpack.unpackb(bytes.fromhex(conv[name]["schema"]), raw=False)
        assert list(schema) == ["kind", "dtype", "item_shape", "format", "version", "codec"]
        assert schema["kind"] == "dense" and schema["dtype"] == dtype
        assert schema["format"] == "loaderx-zrecord" and schema["version"] == 1
    assert msgpack.unpackb(bytes.fromhex(conv["i64_1d"]["schema"]))["item_shape"] == []
    assert msgpack.unpackb(bytes.fromhex(conv["V5x2"]["schema"]))["item_shape"] == [2]
    assert bytes.fromhex(conv["u8_raw"]["schema"]) == (
        b"\x86\xa4kind\xa5dense\xa5dtype\xa3|u1\xaaitem_shape\x92\x1c\x1c\xa6format\xafloaderx-zrecord"
        b"\xa7version\x01\xa5codec\xa3raw"
    )


def test_from_numpy_twice_and_user_schema(results):
    ours, ref = results
    for key in ("converters_from_numpy_twice", "converters_user_schema"):
        _no_error(ours[key])
        assert ours[key] == ref[key], key
    schema = msgpack.unpackb(bytes.fromhex(ours["converters_user_schema"]["schema"]), raw=False)
    assert list(schema) == ["dtype", "item_shape", "extra", "kind", "format", "version", "codec"]
    assert msgpack.unpackb(bytes.fromhex(ours["converters_from_numpy_twice"]["schema"]))["codec"] == "raw"


@pytest.mark.parametrize(
    "name", ["i32_zstd", "i32_raw", "i32_zstd_dict", "f32x3_raw", "scalars", "empty", "one_bytes_object"]
)
def test_from_iterator_writes_identical_stores(results, name):
    ours, ref = results
    _no_error(ours["converters_from_iterator"])
    o, r = ours["converters_from_iterator"][name], ref["converters_from_iterator"][name]
    assert o.get("schema") == r.get("schema"), "schema.msgpack bytes differ"
    assert o == r


def test_from_iterator_bytes_records(results):
    """Byte-string records: identical records and store bytes. The schema differs on purpose:
    the reference records ``|S<len of first>`` (which its own RaggedDataset cannot read),
    ours ``|u1`` rows, so the store reads back as the byte strings."""
    ours, ref = results
    o, r = dict(ours["converters_from_iterator_bytes_list"]), dict(ref["converters_from_iterator_bytes_list"])
    os_, rs_ = msgpack.unpackb(bytes.fromhex(o.pop("schema"))), msgpack.unpackb(bytes.fromhex(r.pop("schema")))
    assert o == r
    assert rs_["dtype"] == "|S3" and os_["dtype"] == "|u1"
    assert {k: v for k, v in os_.items() if k != "dtype"} == {k: v for k, v in rs_.items() if k != "dtype"}


@pytest.mark.parametrize("kind", ["dense_indexing", "ragged_indexing"])
def test_dataset_indexing_forms(results, kind):
    ours, ref = results
    o, r = dict(ours[kind]), dict(ref[kind])
    _no_error(o)
    if kind == "dense_indexing":
        oe, re_ = o.pop("out_of_range"), r.pop("out_of_range")
        assert set(re_["error"]) <= set(oe["error"]) and oe["code"] == re_["code"] == -3
        assert "IndexError" in oe["error"]
    for key, value in o.items():
        if key != "len":
            assert "error" not in value, f"{kind}[{key}] raised {value}"
    for key in r:
        assert o[key] == r[key], key
    assert set(o) == set(r)


def test_sampler_sequential_identical(results):
    ours, ref = results
    _no_error(ours["sampler_sequential"])
    assert ours["sampler_sequential"] == ref["sampler_sequential"]
    s = ours["sampler_sequential"]
    assert s["10x4"]["steps"][:3] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert s["10x4"]["seeks"][str(2**62)][0] == [0, 1, 2, 3]  # k*B wraps at 2**64
    assert s["seed_ignored"] is True


def test_sampler_random_modes_structure(results):
    ours, ref = results
    _no_error(ours["sampler_random"])
    assert set(ours["sampler_random"]) == set(ref["sampler_random"])
    for key, o in ours["sampler_random"].items():
        r = ref["sampler_random"][key]
        L, rest = key.split("x")
        B, rest = rest.split("m")
        mode, seed = rest.split("s")
        L, B, mode = int(L), int(B), int(mode)
        assert [len(b) for b in o["steps"]] == [len(b) for b in r["steps"]], key
        assert o["fresh_same"] is True
        assert o["seek13"] == o["steps"][13]
        flat = np.concatenate([np.asarray(b) for b in o["steps"]])
        assert flat.min() >= 0 and flat.max() < L
        if mode == 2:
            per = max(1, L // B)
            for e in range(len(o["steps"]) // per):
                epoch = np.concatenate([np.asarray(b) for b in o["steps"][e * per : (e + 1) * per]])
                assert len(set(epoch.tolist())) == len(epoch) == min(L, per * B), key
    # two seeds give different streams (the seed is used)
    for key in ours["sampler_random"]:
        if key.endswith("s1") and not key.startswith("3x5"):
            other = key[:-2] + "s42"
            assert ours["sampler_random"][key]["steps"] != ours["sampler_random"][other]["steps"]


def test_loader_one_worker_sequential_batches_identical(results):
    ours, ref = results
    _no_error(ours["loader_sequential_one_worker"])
    assert ours["loader_sequential_one_worker"] == ref["loader_sequential_one_worker"]
    first = ours["loader_sequential_one_worker"]["batches"][0]
    assert first["y"]["values"] == [11 * i for i in range(8)]


def test_exceptions_are_compatible(results):
    ours, ref = results
    assert set(ours["errors"]) == set(ref["errors"])
    for case, r in ref["errors"].items():
        o = ours["errors"][case]
        if "error" not in r:
            assert "error" not in o, f"{case}: the reference succeeds, ours raises {o}"
            continue
        assert "error" in o, f"{case}: the reference raises {r['error'][0]}, ours does not"
        missing = set(r["error"]) - set(o["error"])
        assert not missing, f"{case}: ours raises {o['error'][0]}, not an instance of {sorted(missing)}"
        if r["code"] is not None:
            assert o["code"] == r["code"], case


@pytest.mark.parametrize(
    "case,builtin",
    [
        ("gather_index_out_of_range", "IndexError"),
        ("dense_index_out_of_range", "IndexError"),
        ("ragged_index_out_of_range", "IndexError"),
        ("lengths_index_out_of_range", "IndexError"),
        ("append_over_1mib", "ValueError"),
        ("append_zero_length_record", "ValueError"),
        ("gather_dst_too_small", "ValueError"),
        ("zrecord_on_regular_file", "OSError"),
    ],
)
def test_exceptions_are_also_builtins(results, case, builtin):
    ours, ref = results
    assert "ZrecordError" in ref["errors"][case]["error"]
    assert "ZrecordError" in ours["errors"][case]["error"] and builtin in ours["errors"][case]["error"]
