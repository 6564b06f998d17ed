"""Stores of encoded images: from_images, ImageDataset against Pillow, bad records, determinism
across worker counts and resume, and the reference reading the store as byte strings."""

import importlib.util
import io
import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from _lxhelpers import REPO, run_code
from loaderx.converter import from_images, from_iterator, image_files
from loaderx.dataloader import DataLoader
from loaderx.dataset import ImageDataset, RaggedDataset
from loaderx.errors import BadArgumentError, ImageDecodeError

Image = pytest.importorskip("PIL.Image")
ImageOps = pytest.importorskip("PIL.ImageOps")
features = pytest.importorskip("PIL.features")


def _image_set():
    spec = importlib.util.spec_from_file_location("image_set", REPO / "scripts" / "image_set.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


image_set = _image_set()


@pytest.fixture(scope="module")
def odd():
    return image_set.oddities()


@pytest.fixture(scope="module")
def jpeg_store(tmp_path_factory):
    """120 ImageNet-like JPEGs (two qualities) and the store of them."""
    root = tmp_path_factory.mktemp("jpegs")
    items = [data for data, _ in image_set.jpegs(120, seed=1, qualities=(90, 75))]
    from_images(root / "s", items)
    return root / "s", items


def _pillow(data):
    """Pillow's picture: EXIF orientation applied, converted to RGB."""
    with Image.open(io.BytesIO(data)) as im:
        return ImageOps.exif_transpose(im).convert("RGB")


def _crop_resized(pic, box, size):
    """Pillow's crop, then its bilinear resize of the crop alone (torchvision's resized_crop)."""
    return np.asarray(pic.crop(box).resize((size[1], size[0]), Image.BILINEAR))


def _centre_box(h, w, out_h, out_w):
    """The largest centred box of the output's aspect (computed here independently)."""
    if w * out_h > h * out_w:
        cw, ch = (h * out_w) // out_h, h
    else:
        cw, ch = w, (w * out_h) // out_w
    top, left = (h - ch) // 2, (w - cw) // 2
    return left, top, left + cw, top + ch


def _store_of(tmp_path, name, items):
    path = tmp_path / name
    from_images(path, items)
    return path


def _lossless(name):
    return name.endswith(".png") or name == "lossless.webp"


def _expected(name, data):
    """Pillow's picture, except for 16-bit grey, which Pillow clamps to 255 when it converts to
    RGB: there the high byte of each sample (what the engine and torchvision keep)."""
    if name == "grey16.png":
        with Image.open(io.BytesIO(data)) as im:
            grey = (np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)
        return Image.fromarray(np.repeat(grey[:, :, None], 3, axis=2))
    return _pillow(data)


def _assert_jpeg_close(got, want, what):
    """JPEG decoders round differently (IDCT, chroma upsampling): libjpeg-turbo (Pillow) and
    zune-jpeg agree within 2 per channel on all but a few values in 100,000, never by more
    than 3 (measured: 515 of 18 million values differ by 3 in 224x224 crops of 120 photos)."""
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 3, f"{what}: max difference {diff.max()}"
    assert (diff > 2).mean() < 1e-4, f"{what}: {(diff > 2).sum()} values differ by more than 2"


@pytest.mark.parametrize("size", [(64, 64), (48, 80), (100, 70)])
def test_center_crops_are_close_to_pillow_for_every_format(tmp_path, odd, size):
    names = sorted(odd)
    path = _store_of(tmp_path, "odd", [odd[n] for n in names])
    ds = ImageDataset(path, size, crop="center")
    got = ds[np.arange(len(names))]
    for k, name in enumerate(names):
        pic = _expected(name, odd[name])
        box = _centre_box(pic.height, pic.width, *size)
        want = _crop_resized(pic, box, size)
        if _lossless(name):
            # Decoding is exact (test_whole_pictures_decode_as_pillow_does). The resize is
            # fast_image_resize's, whose fixed-point rounding (16-bit filter coefficients, as
            # Pillow-SIMD's) differs from Pillow's: by 1 on about a quarter of the values of
            # random pictures, by 2 at most.
            diff = np.abs(got[k].astype(int) - want.astype(int))
            assert diff.max() <= 2 and diff.mean() < 0.5, f"{name}: max {diff.max()}, mean {diff.mean():.3f}"
        else:
            # 120x80 pictures barely shrunk keep the decoders' rounding (the 224x224 test below
            # holds the photographs to the tighter bound).
            diff = np.abs(got[k].astype(int) - want.astype(int))
            assert diff.max() <= 4 and diff.mean() < 0.5, f"{name}: max {diff.max()}, mean {diff.mean():.3f}"


def _noise_png(width, height, mode):
    """Random pixels (the hardest case for rounding), as a PNG of `mode`."""
    rng = np.random.default_rng(width * height)
    bands = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    pixels = rng.integers(0, 256, (height, width, bands), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels[:, :, 0] if bands == 1 else pixels, mode).save(buf, "PNG")
    return buf.getvalue()


@pytest.mark.parametrize("size", [(64, 64), (48, 80), (100, 70), (224, 224), (400, 300)])
def test_exact_resize_gives_pillows_crops_of_lossless_images_bit_for_bit(tmp_path, odd, size):
    """resize="exact": Pillow's crop(box).resize(size, BILINEAR), shrinking and enlarging."""
    lossless = {name: data for name, data in odd.items() if _lossless(name)}
    for w, h, mode in [(333, 250, "RGB"), (250, 333, "RGBA"), (97, 61, "L"), (560, 420, "RGB")]:
        lossless[f"noise-{w}x{h}-{mode}.png"] = _noise_png(w, h, mode)
    names = sorted(lossless)
    path = _store_of(tmp_path, "lossless", [lossless[n] for n in names])
    got = ImageDataset(path, size, crop="center", resize="exact")[np.arange(len(names))]
    for k, name in enumerate(names):
        pic = _expected(name, lossless[name])
        want = _crop_resized(pic, _centre_box(pic.height, pic.width, *size), size)
        diff = np.abs(got[k].astype(int) - want.astype(int))
        assert diff.max() == 0, f"{name}: {(diff > 0).sum()} values differ, by up to {diff.max()}"


def test_exact_resize_of_jpegs_equals_pillow_where_both_decode_with_libjpeg_turbo(jpeg_store):
    """Natively JPEGs decode with libjpeg-turbo (as Pillow's do), so resize="exact" gives
    Pillow's centre crops bit for bit; "fast" differs from them by rounding only."""
    path, items = jpeg_store
    idx = np.arange(len(items))
    fast = ImageDataset(path, 224, crop="center")[idx]
    exact = ImageDataset(path, 224, crop="center", resize="exact")[idx]
    want = []
    for data in items:
        pic = _pillow(data)
        want.append(_crop_resized(pic, _centre_box(pic.height, pic.width, 224, 224), (224, 224)))
    want = np.stack(want)
    off = np.abs(fast.astype(int) - want.astype(int))
    assert 0 < off.mean() < 0.5 and off.max() <= 2, f"fast: max {off.max()}, mean {off.mean():.3f}"
    if features.version("libjpeg_turbo") is None:
        _assert_jpeg_close(exact, want, "exact 224x224 centre crops (Pillow without libjpeg-turbo)")
    else:
        diff = np.abs(exact.astype(int) - want.astype(int))
        assert diff.max() == 0, f"{(diff > 0).sum()} values differ, by up to {diff.max()}"


def test_whole_pictures_decode_as_pillow_does(tmp_path, odd):
    names = sorted(odd)
    path = _store_of(tmp_path, "odd", [odd[n] for n in names])
    for k, name in enumerate(names):
        pic = np.asarray(_expected(name, odd[name]))
        got = ImageDataset(path, pic.shape[:2], crop="none")[k]
        assert got.shape == pic.shape, name
        diff = np.abs(got.astype(int) - pic.astype(int))
        if _lossless(name):
            assert diff.max() == 0, f"{name}: max difference {diff.max()}"
        else:
            # Whole pictures show the decoders' rounding unsmoothed (up to 4 at chroma edges).
            assert diff.max() <= 4 and diff.mean() < 0.5, f"{name}: max {diff.max()}, mean {diff.mean():.3f}"


def test_exif_orientation_is_applied(tmp_path, odd):
    names = ["exif3.jpg", "exif6.jpg", "exif8.jpg"]
    path = _store_of(tmp_path, "exif", [odd[n] for n in names])
    for k, (name, turn) in enumerate(zip(names, [2, -1, 1])):
        with Image.open(io.BytesIO(odd[name])) as im:
            stored = np.asarray(im.convert("RGB"))  # as stored, no orientation applied
        want = np.rot90(stored, k=turn)
        got = ImageDataset(path, want.shape[:2], crop="none")[k]
        assert np.abs(got.astype(int) - want.astype(int)).mean() < 0.5, name


def test_center_crops_of_imagenet_like_jpegs_are_within_2_of_pillow(jpeg_store):
    path, items = jpeg_store
    got = ImageDataset(path, 224, crop="center")[np.arange(len(items))]
    want = []
    for data in items:
        pic = _pillow(data)
        box = _centre_box(pic.height, pic.width, 224, 224)
        want.append(_crop_resized(pic, box, (224, 224)))
    _assert_jpeg_close(got, np.stack(want), "224x224 centre crops")


def test_random_resized_crops_are_keyed_by_seed_step_and_record(jpeg_store):
    path, _ = jpeg_store
    ds = ImageDataset(path, 32, crop="random_resized", flip=True, seed=7)
    idx = np.arange(16)
    a = ds.at_step(idx, 3)
    assert np.array_equal(a, ds.at_step(idx, 3))
    assert not np.array_equal(a, ds.at_step(idx, 4))
    # Record i's picture does not depend on which other records share its batch.
    assert np.array_equal(a[5:6], ds.at_step(idx[5:6], 3))
    other = ImageDataset(path, 32, crop="random_resized", flip=True, seed=8)
    assert not np.array_equal(a, other.at_step(idx, 3))


def test_flip_mirrors_the_picture(jpeg_store):
    path, _ = jpeg_store
    plain = ImageDataset(path, (40, 60), crop="center")
    mirrored = ImageDataset(path, (40, 60), crop="center", flip=1.0)
    assert np.array_equal(plain[np.arange(8)][:, :, ::-1], mirrored[np.arange(8)])


def test_float32_output_is_uint8_scaled_to_unit(jpeg_store):
    path, _ = jpeg_store
    u8 = ImageDataset(path, 24)[np.arange(4)]
    f32 = ImageDataset(path, 24, dtype=np.float32)[np.arange(4)]
    assert f32.dtype == np.float32 and f32.shape == (4, 24, 24, 3)
    assert np.allclose(f32, u8 / np.float32(255), atol=1e-7)


def _png_header_only(width, height):
    """A PNG whose IHDR claims width x height (valid CRC) over almost no data."""

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def _jpeg_claiming(data, width, height):
    """A JPEG whose SOF0 header says width x height."""
    at = data.index(b"\xff\xc0") + 5
    return data[:at] + struct.pack(">HH", height, width) + data[at + 4 :]


def test_bad_records_raise_typed_errors_naming_the_record(tmp_path, odd):
    good = odd["rgb.jpg"]
    bad = {
        "truncated jpeg": good[: len(good) // 2],
        "truncated png": odd["rgb.png"][: len(odd["rgb.png"]) // 2],
        "not an image": b"hello, world: just text",
        "png bomb": _png_header_only(100_000, 100_000),
        "jpeg bomb": _jpeg_claiming(good, 60_000, 60_000),
        "garbage after a jpeg marker": b"\xff\xd8\xff" + bytes(range(256)) * 4,
    }
    path = tmp_path / "bad"
    from_iterator(path, [good, *bad.values()])
    ds = ImageDataset(path, 32)
    assert ds[0].shape == (32, 32, 3)
    for k, name in enumerate(bad, start=1):
        with pytest.raises(ImageDecodeError) as e:
            ds[[0, k]]
        assert e.value.index == k, name
        assert f"record {k}" in str(e.value), name
    with pytest.raises(ImageDecodeError, match="more than the limit"):
        ds[4]
    # The limit is a setting: a small one refuses an ordinary picture.
    with pytest.raises(ImageDecodeError, match="limit of 100"):
        ImageDataset(path, 32, max_pixels=100)[0]


def test_crop_none_refuses_a_picture_of_another_size(tmp_path, odd):
    path = _store_of(tmp_path, "one", [odd["rgb.png"]])
    with pytest.raises(ImageDecodeError, match="crop='none' needs exactly 64x64"):
        ImageDataset(path, 64, crop="none")[0]


def test_from_images_refuses_non_images_and_keeps_nothing(tmp_path, odd):
    path = tmp_path / "s"
    from_images(path, [odd["rgb.jpg"]])
    for bad in ([odd["rgb.png"], b""], [odd["rgb.png"], b"plain text"]):
        with pytest.raises(BadArgumentError, match="item 1") as e:
            from_images(path, bad)
        assert e.value.index == 1
        assert len(RaggedDataset(path)) == 1
    with pytest.raises(TypeError, match="file paths or bytes"):
        from_images(tmp_path / "t", [123])


def test_from_images_records_the_media_and_mixes_on_append(tmp_path, odd):
    path = tmp_path / "s"
    from_images(path, [odd["rgb.jpg"], odd["grey.jpg"]])
    assert ImageDataset(path, 8).media == "jpeg"
    from_images(path, [odd["rgb.png"]])
    assert ImageDataset(path, 8).media == "mixed"
    web = tmp_path / "w"
    from_images(web, [odd["lossy.webp"], odd["lossless.webp"]])
    assert ImageDataset(web, 8).media == "webp"


def test_from_images_takes_a_directory_and_paths_in_sorted_order(tmp_path, odd):
    root = tmp_path / "tree"
    for rel, name in [("b/2.png", "rgb.png"), ("a/1.JPG", "rgb.jpg"), ("a/0.webp", "lossy.webp")]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(odd[name])
    (root / "notes.txt").write_text("not an image")
    files = image_files(root)
    assert [f.relative_to(root).as_posix() for f in files] == ["a/0.webp", "a/1.JPG", "b/2.png"]
    assert from_images(tmp_path / "d", root) == 3
    stored = RaggedDataset(tmp_path / "d")
    assert [bytes(stored[i]) for i in range(3)] == [f.read_bytes() for f in files]
    assert from_images(tmp_path / "p", [str(f) for f in files]) == 3
    assert ImageDataset(tmp_path / "p", 8).media == "mixed"


def test_dataset_checks_its_arguments(jpeg_store, tmp_path):
    path, _ = jpeg_store
    for kwargs, match in [
        ({"size": 0}, "size"),
        ({"size": (3, 4, 5)}, "size"),
        ({"size": 8, "crop": "zoom"}, "crop"),
        ({"size": 8, "resize": "lanczos"}, "resize"),
        ({"size": 8, "flip": 2.0}, "flip"),
        ({"size": 8, "dtype": np.int16}, "dtype"),
        ({"size": 8, "crop": "random_resized", "scale": (0.5, 0.1)}, "scale"),
    ]:
        with pytest.raises(ValueError, match=match):
            ImageDataset(path, **kwargs)
    dense = tmp_path / "dense"
    from loaderx.converter import from_numpy

    from_numpy(dense, np.zeros((4, 3), np.float32))
    with pytest.raises(Exception, match="ragged|encoded images"):
        ImageDataset(dense, 8)


def _batches(loader, n):
    out = [next(loader)["image"].copy() for _ in range(n)]
    loader.close()
    return out


def test_batches_are_the_same_for_any_worker_count_and_resume_exactly(jpeg_store):
    path, _ = jpeg_store
    ds = ImageDataset(path, 48, crop="random_resized", flip=True)
    make = lambda **kw: DataLoader({"image": ds}, batch_size=12, seed=5, **kw)  # noqa: E731
    one = _batches(make(num_workers=1), 6)
    three = _batches(make(num_workers=3), 6)
    assert all(np.array_equal(a, b) for a, b in zip(one, three))
    assert not np.array_equal(one[0], one[1])
    loader = make(num_workers=2)
    _batches_first = [next(loader) for _ in range(2)]
    state = loader.state_dict()
    loader.close()
    resumed = make(num_workers=2)
    resumed.load_state_dict(state)
    rest = _batches(resumed, 4)
    assert all(np.array_equal(a, b) for a, b in zip(one[2:], rest))
    # The loader's seed keys the crops: another seed, other pictures of the same records.
    other = _batches(DataLoader({"image": ds}, batch_size=12, seed=6, num_workers=1), 1)
    assert not np.array_equal(one[0], other[0])


def test_worker_processes_make_the_same_batches(jpeg_store):
    path, _ = jpeg_store
    ds = ImageDataset(path, 32, crop="random_resized", flip=True)
    threads = _batches(DataLoader({"image": ds}, batch_size=8, seed=2, num_workers=1), 3)
    procs = _batches(DataLoader({"image": ds}, batch_size=8, seed=2, num_workers=2, workers="processes"), 3)
    assert all(np.array_equal(a, b) for a, b in zip(threads, procs))


def test_the_reference_reads_an_image_store_as_byte_strings(ref_python, jpeg_store):
    path, items = jpeg_store
    code = (
        "import sys, hashlib; from loaderx.dataset import RaggedDataset; "
        f"ds = RaggedDataset({str(path)!r}); "
        "print(len(ds)); print(hashlib.sha256(b''.join(bytes(ds[i]) for i in range(len(ds)))).hexdigest())"
    )
    out = run_code(ref_python, code).stdout.split()
    import hashlib

    assert int(out[0]) == len(items)
    assert out[1] == hashlib.sha256(b"".join(items)).hexdigest()


def _tool(*args):
    p = subprocess.run([sys.executable, "-m", "loaderx", *map(str, args)], capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_the_tool_converts_a_directory_as_from_images_does(tmp_path, odd):
    root = tmp_path / "tree"
    for rel, name in [("b/2.png", "rgb.png"), ("a/1.JPG", "rgb.jpg"), ("a/x/0.webp", "lossy.webp"), ("a/0.jpeg", "cmyk.jpg")]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(odd[name])
    (root / "README").write_text("not an image")
    code, _, err = _tool("convert", "--images", root, tmp_path / "cli")
    assert code == 0, err
    from_images(tmp_path / "py", root)
    cli, py = RaggedDataset(tmp_path / "cli"), RaggedDataset(tmp_path / "py")
    assert len(cli) == len(py) == 4
    assert all(np.array_equal(cli[i], py[i]) for i in range(4))
    assert cli.schema["media"] == py.schema["media"] == "mixed"
    assert cli.schema["codec"] == "raw"
    # A file with an image's name that is not one fails, naming it; nothing is kept.
    (root / "c.png").write_bytes(b"plain text")
    code, _, err = _tool("convert", "--images", root, tmp_path / "bad")
    assert code == 2 and "c.png" in err, err
    assert not (tmp_path / "bad" / "meta.zr").exists()
    code, _, err = _tool("convert", "--images", tmp_path / "nothing-here", tmp_path / "none")
    assert code == 2 and "not a directory" in err


def test_verify_images_lists_every_undecodable_record(tmp_path, odd):
    good = odd["rgb.jpg"]
    path = tmp_path / "s"
    from_iterator(path, [good, good[:300], odd["rgb.png"], b"text, not an image", _png_header_only(50_000, 50_000)])
    code, out, err = _tool("verify", "--images", path)
    assert code == 1, err
    listed = [line for line in out.splitlines() if line.startswith("undecodable image")]
    assert [int(line.split()[2].rstrip(":")) for line in listed] == [1, 3, 4], out
    assert "more than the limit" in listed[2]
    code, out, _ = _tool("verify", "--images", "--json", "--max-pixels", 5000, path)
    report = json.loads(out)
    assert code == 1 and report["images"]["undecodable_count"] == 5  # both 120x80 pictures are over 5000 pixels
    clean = tmp_path / "clean"
    from_images(clean, [good, odd["rgb.png"]])
    code, out, _ = _tool("verify", "--images", clean)
    assert code == 0 and "2 records decoded as images, 0 undecodable" in out


def test_from_arrow_stores_a_binary_or_hf_image_column(tmp_path, odd):
    pa = pytest.importorskip("pyarrow")
    items = [odd["rgb.jpg"], odd["rgb.png"], odd["lossy.webp"]]
    table = pa.table({"label": [0, 1, 2], "image": pa.array(items, pa.binary())})
    from loaderx.converter import from_arrow

    assert from_arrow(tmp_path / "a", table, column="image", images=True) == 3
    ds = RaggedDataset(tmp_path / "a")
    assert [bytes(ds[i]) for i in range(3)] == items and ds.schema["media"] == "mixed"
    hf_like = pa.table({"image": pa.StructArray.from_arrays([pa.array(items), pa.array(["a", "b", "c"])], ["bytes", "path"])})
    assert from_arrow(tmp_path / "b", hf_like, images=True) == 3
    assert ImageDataset(tmp_path / "b", 16)[np.arange(3)].shape == (3, 16, 16, 3)
    with pytest.raises(TypeError, match="binary"):
        from_arrow(tmp_path / "c", table, column="label", images=True)
    bad = pa.table({"image": pa.array([odd["rgb.png"], b"nope"], pa.binary())})
    with pytest.raises(BadArgumentError, match="row 1"):
        from_arrow(tmp_path / "d", bad, images=True)


def test_image_datasets_mix_and_resume_exactly(tmp_path, jpeg_store, odd):
    path, _ = jpeg_store
    other = _store_of(tmp_path, "odd", [odd[n] for n in sorted(odd)])
    a, b = (ImageDataset(p, 24, crop="random_resized", flip=True) for p in (path, other))
    make = lambda: DataLoader.mix([{"image": a}, {"image": b}], batch_size=8, weights=[0.5, 0.5], seed=1)  # noqa: E731
    loader = make()
    first = next(loader)
    assert first["image"].shape == (8, 24, 24, 3)
    state = loader.state_dict()
    want = [next(loader)["image"] for _ in range(3)]
    loader.close()
    resumed = make()
    resumed.load_state_dict(state)
    assert all(np.array_equal(next(resumed)["image"], w) for w in want)
    resumed.close()
    with pytest.raises(ValueError, match="same pictures"):
        DataLoader.mix([{"image": a}, {"image": ImageDataset(other, 16)}], batch_size=8, weights=[0.5, 0.5])
