"""What a new user meets in the first hour works, or fails at once with an error that says what
to do (issue 23).

Pins: writes never turn a URL into a local folder; sampler modes by name, and shuffle= refused
with the way to say it; converters append, overwrite or refuse, and never write into a folder
that is neither empty nor a store; a closed dataset has a repr and refuses len() and reads;
bad loader arguments fail at construction (mixed layouts, a bare dataset, a fractional seek);
bad append offsets say what they add up to; index arrays keep their shape as in NumPy;
structured dtypes are refused; manifests list a store once, create their directory, refresh,
and say "no store" with the path as given; transforms that worker processes could not load
are refused when the loader is built; missing extras say what to install; the default worker
count is one per core; the DataLoader's repr shows its config.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from _lxhelpers import clean_env
from loaderx import manifest
from loaderx.converter import from_arrow, from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import BadArgumentError, StoreClosedError, StoreNotFoundError
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

#: URLs converters cannot write to (s3://, gs:// and az:// they write to: test_remote_write.py).
READ_ONLY_URLS = ["http://127.0.0.1:9/x", "https://127.0.0.1:9/x", "ftp://host/x"]


# --- writes to a URL ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", READ_ONLY_URLS)
def test_converters_refuse_a_url_and_create_nothing(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pa = pytest.importorskip("pyarrow")
    why = "unsupported URL scheme" if url.startswith("ftp") else "read-only"
    with pytest.raises(BadArgumentError, match=why) as e:
        from_numpy(url, np.arange(10), progress=False)
    assert url in str(e.value)
    with pytest.raises(BadArgumentError, match=why):
        from_iterator(url, [np.arange(3)], progress=False)
    with pytest.raises(BadArgumentError, match=why):
        from_arrow(url, pa.table({"x": np.arange(5)}), progress=False)
    with pytest.raises(BadArgumentError, match=why):
        manifest.commit(url, ["a"])
    if url.startswith("ftp"):
        with pytest.raises(BadArgumentError, match=why):
            Zrecord(url)
    assert os.listdir(tmp_path) == [], "a refused write left something behind"


def test_from_iterator_refuses_a_url_before_reading_the_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    taken = []

    def records():
        for k in range(3):
            taken.append(k)
            yield np.arange(k + 1)

    with pytest.raises(BadArgumentError):
        from_iterator("http://127.0.0.1:9/x", records(), progress=False)
    assert taken == []


def test_file_url_is_the_local_path(tmp_path):
    url = (tmp_path / "store").as_uri()
    assert from_numpy(url, np.arange(10), progress=False) == 10
    assert (tmp_path / "store" / "meta.zr").is_file()
    with DenseDataset(url) as ds:
        assert ds[:].tolist() == list(range(10))
    with pytest.raises(StoreNotFoundError) as e:
        DenseDataset((tmp_path / "missing").as_uri())
    assert os.fspath(tmp_path / "missing") in str(e.value)
    with pytest.raises(BadArgumentError, match="file:///abs/path"):
        DenseDataset("file://otherhost/x")


# --- sampling modes -----------------------------------------------------------------------------


def test_sampler_modes_by_name_are_the_numbered_modes():
    for name, number in (("sequential", 0), ("iid", 1), ("cyclic", 2), ("CYCLIC", 2), (Sampler.Mode.IID, 1)):
        a, b = Sampler(50, 8, name, seed=3), Sampler(50, 8, number, seed=3)
        assert a.mode == Sampler.Mode(number)
        for step in range(10):
            assert a.batch_at(step).tolist() == b.batch_at(step).tolist()
    with pytest.raises(ValueError, match="'sequential'.*'iid'.*'cyclic'"):
        Sampler(50, 8, "shuffled")


def test_loader_and_mix_take_mode_names(tmp_path):
    from_numpy(tmp_path / "a", np.arange(40), progress=False)
    from_numpy(tmp_path / "b", np.arange(40, 70), progress=False)
    with DataLoader({"x": DenseDataset(tmp_path / "a")}, batch_size=8, mode="sequential", num_workers=1) as loader:
        assert next(loader)["x"].tolist() == list(range(8))
    with DataLoader({"x": DenseDataset(tmp_path / "a")}, batch_size=40, mode="cyclic", seed=1, num_workers=1) as loader:
        assert sorted(next(loader)["x"].tolist()) == list(range(40))  # one pass: every record once
    srcs = [{"x": DenseDataset(tmp_path / "a")}, {"x": DenseDataset(tmp_path / "b")}]
    with DataLoader.mix(srcs, [1, 1], batch_size=8, mode="cyclic", seed=2, num_workers=1) as named:
        with DataLoader.mix(srcs, [1, 1], batch_size=8, mode=2, seed=2, num_workers=1) as numbered:
            for _ in range(5):
                assert next(named)["x"].tolist() == next(numbered)["x"].tolist()


def test_shuffle_is_a_clear_type_error(tmp_path):
    from_numpy(tmp_path / "a", np.arange(40), progress=False)
    for value in (True, False):
        with pytest.raises(TypeError, match="mode=.*'cyclic'"):
            DataLoader({"x": DenseDataset(tmp_path / "a")}, batch_size=8, shuffle=value)


# --- converters: append, overwrite or refuse ------------------------------------------------------


def test_converter_modes(tmp_path):
    path = tmp_path / "s"
    assert from_numpy(path, np.arange(5), progress=False) == 5
    from_numpy(path, np.arange(5, 8), progress=False)  # the default appends, as the reference does
    with DenseDataset(path) as ds:
        assert ds[:].tolist() == list(range(8))
    from_numpy(path, np.arange(100, 103), progress=False, mode="overwrite")
    with DenseDataset(path) as ds:
        assert ds[:].tolist() == [100, 101, 102]
    with pytest.raises(FileExistsError, match="mode='append'.*mode='overwrite'"):
        from_numpy(path, np.arange(3), progress=False, mode="error")
    from_numpy(tmp_path / "new", np.arange(3), progress=False, mode="error")  # nothing there: fine
    with pytest.raises(ValueError, match="'append', 'overwrite', 'error'"):
        from_numpy(tmp_path / "x", np.arange(3), progress=False, mode="replace")
    # overwrite may change the layout: the old schema is gone with the old records
    from_iterator(path, [np.arange(2, dtype=np.int16), np.arange(3, dtype=np.int16)], progress=False, mode="overwrite")
    with RaggedDataset(path) as rs:
        assert [r.tolist() for r in rs[:]] == [[0, 1], [0, 1, 2]]
    with pytest.raises(FileExistsError):
        from_iterator(path, [np.arange(2, dtype=np.int16)], progress=False, mode="error")


def test_a_failed_overwrite_leaves_the_old_store_whole(tmp_path):
    """mode="overwrite" builds the new store beside the old one: a conversion that fails half-way
    leaves the old records readable and no staging directory behind; one that succeeds keeps the
    directory's other files."""
    path = tmp_path / "s"
    from_numpy(path, np.arange(10, dtype=np.int32), progress=False)
    (path / "NOTES.txt").write_text("kept")

    def records():
        yield np.arange(3, dtype=np.int32)
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        from_iterator(path, records(), progress=False, mode="overwrite")
    with DenseDataset(path) as ds:
        assert ds[:].tolist() == list(range(10))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]

    from_numpy(path, np.arange(4, dtype=np.int64), progress=False, mode="overwrite")
    with DenseDataset(path) as ds:
        assert ds[:].tolist() == [0, 1, 2, 3] and ds[:].dtype == np.int64
    assert (path / "NOTES.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_from_arrow_modes(tmp_path):
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "s"
    from_arrow(path, pa.table({"x": np.arange(4)}), progress=False)
    from_arrow(path, pa.table({"x": np.arange(4)}), progress=False)
    assert len(DenseDataset(path)) == 8
    from_arrow(path, pa.table({"x": np.arange(3)}), progress=False, mode="overwrite")
    assert DenseDataset(path)[:].tolist() == [0, 1, 2]
    with pytest.raises(FileExistsError):
        from_arrow(path, pa.table({"x": np.arange(3)}), progress=False, mode="error")


def test_converters_refuse_a_folder_that_is_neither_empty_nor_a_store(tmp_path):
    for k in range(2):
        from_numpy(tmp_path / f"p{k}", np.arange(4), progress=False)
    (tmp_path / "m").mkdir()
    manifest.commit(tmp_path / "m", [os.fspath(tmp_path / "p0"), os.fspath(tmp_path / "p1")])
    before = sorted(os.listdir(tmp_path / "m"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('hi')\n")
    for folder in (tmp_path / "m", project):
        for write in (
            lambda p: from_numpy(p, np.arange(3), progress=False),
            lambda p: from_iterator(p, [b"abc"], progress=False),
            lambda p: from_numpy(p, np.arange(3), progress=False, mode="overwrite"),
        ):
            with pytest.raises(BadArgumentError, match="neither empty nor a store"):
                write(folder)
    assert sorted(os.listdir(tmp_path / "m")) == before == ["manifest.json"]
    assert os.listdir(project) == ["train.py"]
    with DenseDataset(tmp_path / "m") as ds:  # the manifest still opens as itself
        assert len(ds) == 8
    (tmp_path / "empty").mkdir()
    assert from_numpy(tmp_path / "empty", np.arange(3), progress=False) == 3


# --- closed datasets ----------------------------------------------------------------------------


def test_closed_dataset_has_a_repr_and_refuses_reads(tmp_path):
    from_numpy(tmp_path / "d", np.arange(12).reshape(6, 2), progress=False)
    from_iterator(tmp_path / "r", [np.arange(n) for n in (1, 2, 3)], progress=False)
    (tmp_path / "m").mkdir()
    manifest.commit(tmp_path / "m", ["../d"])
    for ds in (DenseDataset(tmp_path / "d"), RaggedDataset(tmp_path / "r"), DenseDataset(tmp_path / "m")):
        ds.close()
        assert "closed" in repr(ds)
        with pytest.raises(StoreClosedError):
            len(ds)
        for idx in (0, [0, 1], slice(None), np.array([0], dtype=np.uint64)):
            with pytest.raises(StoreClosedError):
                ds[idx]


# --- errors at construction ---------------------------------------------------------------------


def test_mix_of_different_layouts_fails_at_construction(tmp_path):
    from_numpy(tmp_path / "a", np.zeros((10, 4), np.float32), progress=False)
    from_numpy(tmp_path / "b", np.zeros((10, 5), np.float32), progress=False)
    from_numpy(tmp_path / "c", np.zeros((10, 4), np.float64), progress=False)
    for other, shown in (("b", r"\(5,\)"), ("c", "float64")):
        with pytest.raises(ValueError, match=f"stream 'x': source 1 holds .*{shown}"):
            DataLoader.mix([{"x": DenseDataset(tmp_path / "a")}, {"x": DenseDataset(tmp_path / other)}], [1, 1], batch_size=8)


def test_a_bare_dataset_is_a_clear_type_error(tmp_path):
    from_numpy(tmp_path / "a", np.zeros((10, 4), np.float32), progress=False)
    with pytest.raises(TypeError, match=r"a dict such as \{'data': dataset\}"):
        DataLoader(DenseDataset(tmp_path / "a"), batch_size=8)
    with pytest.raises(TypeError, match="a dict such as"):
        DataLoader.mix([DenseDataset(tmp_path / "a")], [1], batch_size=8)


def test_seek_refuses_a_non_integer(tmp_path):
    from_numpy(tmp_path / "a", np.arange(40), progress=False)
    with DataLoader({"x": DenseDataset(tmp_path / "a")}, batch_size=8, mode=0, num_workers=1) as loader:
        for bad in (1.5, 1.0, "1"):
            with pytest.raises(TypeError, match="integer"):
                loader.seek(bad)
        loader.seek(np.int64(2))
        assert next(loader)["x"].tolist() == list(range(16, 24))


def test_append_offsets_that_run_backwards_say_what_they_add_up_to(tmp_path):
    with Zrecord(tmp_path / "z") as z:
        with pytest.raises(BadArgumentError) as e:
            z.append(b"abcdef", [3, 0])
        msg = str(e.value)
        assert "record 0 would run from byte 3 to byte 0" in msg and "sum to 3, not 6" in msg
        assert "18446744073709551615" not in msg
        assert len(z) == 0
        z.append(b"abcdef", [0, 3])
        assert len(z) == 2


# --- indexing -----------------------------------------------------------------------------------


def test_index_arrays_keep_their_shape_as_in_numpy(tmp_path):
    a = np.arange(10 * 16, dtype=np.int32).reshape(10, 16)
    from_numpy(tmp_path / "d", a, progress=False)
    seqs = [np.arange(n, dtype=np.int16) for n in range(1, 7)]
    from_iterator(tmp_path / "r", seqs, progress=False)
    idx = np.array([[0, 1], [2, 3]])
    with DenseDataset(tmp_path / "d") as ds:
        for index in (idx, idx.tolist(), idx.astype(np.uint64), np.array([[[1], [2]], [[3], [-1]]])):
            got = ds[index]
            assert got.shape == a[index].shape
            np.testing.assert_array_equal(got, a[index])
        assert ds[np.array([1, 2])].shape == (2, 16)
    with RaggedDataset(tmp_path / "r") as rs:
        got = rs[idx]
        assert [[r.tolist() for r in row] for row in got] == [[seqs[i].tolist() for i in row] for row in idx]


def test_structured_dtypes_are_refused_at_conversion(tmp_path):
    rec = np.zeros(4, dtype=[("a", np.int32), ("b", np.float32)])
    with pytest.raises(TypeError, match=r"structured dtype.*\['a', 'b'\].*array\.view\('V8'\)"):
        from_numpy(tmp_path / "s", rec, progress=False)
    with pytest.raises(TypeError, match="structured dtype"):
        from_iterator(tmp_path / "t", [rec], progress=False)
    assert os.listdir(tmp_path) == []
    # plain void records (opaque bytes, no field names to lose) are stored and read back as such
    void = np.frombuffer(bytes(range(32)), dtype="V8")
    from_numpy(tmp_path / "v", void, progress=False)
    with DenseDataset(tmp_path / "v") as ds:
        assert ds[:].dtype == np.dtype("V8") and ds[:].tobytes() == bytes(range(32))


# --- manifests ----------------------------------------------------------------------------------


def test_a_store_is_listed_once_whatever_its_spelling(tmp_path):
    from_numpy(tmp_path / "A", np.arange(5), progress=False)
    with pytest.raises(BadArgumentError, match="lists each store once"):
        manifest.commit(tmp_path, ["A", "./A/"])
    assert not (tmp_path / "manifest.json").exists()
    manifest.commit(tmp_path, ["./A/"])
    assert manifest.stores(tmp_path) == [("A", 5)]
    for again in (os.fspath(tmp_path / "A"), "A/", "sub/../A"):
        with pytest.raises(BadArgumentError, match="lists each store once"):
            manifest.commit(tmp_path, [again])
    assert len(DenseDataset(tmp_path)) == 5


def test_commit_creates_the_manifest_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from_numpy("A", np.arange(5), progress=False)
    assert manifest.commit("m2", ["../A"]) == [("../A", 5)]
    assert DenseDataset("m2")[:].tolist() == list(range(5))
    with pytest.raises(StoreNotFoundError):
        manifest.commit("m3/deeper", ["../../missing"])
    assert not (tmp_path / "m3").exists(), "a refused commit leaves no directory behind"


def test_refresh_lists_the_new_lengths(tmp_path):
    for k in range(2):
        from_numpy(tmp_path / f"p{k}", np.arange(k * 10, k * 10 + 10), progress=False)
    (tmp_path / "m").mkdir()
    manifest.commit(tmp_path / "m", ["../p0", "../p1"])
    from_numpy(tmp_path / "p0", np.arange(100, 103), progress=False)
    with pytest.raises(Exception, match="p0"):
        DenseDataset(tmp_path / "m")
    assert manifest.refresh(tmp_path / "m") == [("../p0", 13), ("../p1", 10)]
    with DenseDataset(tmp_path / "m") as ds:
        assert ds[:].tolist() == [*range(10), 100, 101, 102, *range(10, 20)]
    assert sorted(os.listdir(tmp_path / "m")) == ["manifest.json"]


def test_no_dataset_is_store_not_found_with_the_path(tmp_path):
    (tmp_path / "file.bin").write_bytes(b"x")
    for path in (tmp_path / "missing", tmp_path / "file.bin"):
        with pytest.raises(StoreNotFoundError) as e:
            DenseDataset(path)
        assert os.fspath(path) in str(e.value)
    with pytest.raises(StoreNotFoundError):
        manifest.stores(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


# --- worker processes and the main module ---------------------------------------------------------


def _run(args, cwd):
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=120
    )


_USE = """
import numpy as np
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

with open("runs.txt", "a") as f:
    f.write("ran\\n")
SCALE = 2

def double(x):
    return x * SCALE

def augment(batch):
    return {"x": double(batch["x"]) + np.int64(0)}
"""

_TAKE = """
from_numpy("x", np.arange(64), progress=False, mode="overwrite")
with DataLoader({"x": DenseDataset("x")}, batch_size=8, mode="sequential", num_workers=2, transform=augment,
                workers="processes") as loader:
    print("GOT", [next(loader)["x"].tolist() for _ in range(2)])
"""

_WANT = "GOT [[0, 2, 4, 6, 8, 10, 12, 14], [16, 18, 20, 22, 24, 26, 28, 30]]"


def test_transform_from_python_c_runs_in_worker_processes(tmp_path):
    proc = _run(["-c", _USE + _TAKE], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _WANT in proc.stdout, proc.stdout


def test_script_without_main_guard_runs_and_is_not_run_again_by_workers(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_USE + _TAKE)
    proc = _run([script], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _WANT in proc.stdout, proc.stdout
    assert (tmp_path / "runs.txt").read_text() == "ran\n", "a worker ran the script again"


def test_script_with_main_guard_runs_its_transform_in_workers(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_USE + 'if __name__ == "__main__":\n' + textwrap.indent(_TAKE, "    "))
    proc = _run([script], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _WANT in proc.stdout, proc.stdout
    assert (tmp_path / "runs.txt").read_text().count("ran") == 3  # the parent and each worker, as under spawn


def test_a_class_and_a_lambda_from_python_c_run_in_worker_processes(tmp_path):
    code = _USE + textwrap.dedent(
        """
        from_numpy("x", np.arange(64), progress=False, mode="overwrite")

        class Augment:
            def __init__(self, k):
                self.k = k

            def __call__(self, batch):
                return {"x": batch["x"] * self.k}

        for t in (Augment(3), lambda batch: {"x": batch["x"] * 3}):
            with DataLoader({"x": DenseDataset("x")}, batch_size=8, mode="sequential", num_workers=1,
                            transform=t, workers="processes") as loader:
                print("GOT", [next(loader)["x"].tolist() for _ in range(2)])
        """
    )
    proc = _run(["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr
    want = "GOT " + str([[3 * i for i in range(8)], [3 * i for i in range(8, 16)]])
    assert proc.stdout.count(want) == 2, proc.stdout


# --- missing extras -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, package, install",
    [("loaderx.torch", "torch", "pip install torch"), ("loaderx.jax", "jax", "pip install jax"),
     ("loaderx.ray", "ray", 'pip install "ray[data]"')],
)
def test_a_missing_extra_says_what_to_install(module, package, install, tmp_path):
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        f"try:\n    import {module}\nexcept ModuleNotFoundError as e:\n    print('MSG', e.name, e)\n"
    )
    proc = _run(["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"MSG {package} ") and install in proc.stdout, proc.stdout


def test_arrow_without_pyarrow_says_what_to_install(tmp_path):
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from loaderx.converter import from_arrow\n"
        "try:\n    from_arrow('s', 't.parquet')\nexcept ImportError as e:\n    print('MSG', e)\n"
    )
    proc = _run(["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "pip install pyarrow" in proc.stdout, proc.stdout


# --- defaults and repr --------------------------------------------------------------------------


def test_default_workers_are_one_per_core(tmp_path):
    from_numpy(tmp_path / "a", np.arange(40), progress=False)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with DataLoader({"x": DenseDataset(tmp_path / "a")}, batch_size=8) as loader:
        assert loader.num_workers == cores
    assert "one per core" in DataLoader.__doc__


def test_loader_repr_shows_its_config(tmp_path):
    from_numpy(tmp_path / "a", np.arange(40), progress=False)
    loader = DataLoader({"x": DenseDataset(tmp_path / "a")}, batch_size=8, mode=2, seed=3, num_workers=2)
    text = repr(loader)
    for part in ("'x': DenseDataset(", "batch_size=8", "mode='cyclic'", "seed=3", "num_workers=2 threads", "step=0"):
        assert part in text, text
    next(loader)
    assert "step=1" in repr(loader)
    loader.close()
    assert "closed" in repr(loader)


def test_dataset_docstrings_document_cache_and_storage_options():
    for cls in (DenseDataset, RaggedDataset):
        assert "storage_options" in cls.__doc__ and "cache" in cls.__doc__
