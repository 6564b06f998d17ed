"""The engine's RandomResizedCrop against torchvision's own ``RandomResizedCrop.get_params``: given
the same random draws, the same rectangle, for any image size, scale and ratio (property test).
And an ImageDataset batch against torchvision's v2 transforms on the crops it chose."""

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torchvision.transforms import RandomResizedCrop  # noqa: E402

from loaderx import _loaderx  # noqa: E402

#: Float32 uniforms as the engine draws them: k / 2^24.
uniforms = st.lists(st.integers(0, 2**24 - 1).map(lambda k: k / 2**24), min_size=20, max_size=20)


class _Draws:
    """Stands in for torch's generator inside get_params: ``torch.empty(1).uniform_(a, b)``
    gives ``(b - a) * u + a`` in float32 for the next given ``u``, ``torch.randint(lo, hi)``
    the next given integer modulo the range."""

    def __init__(self, us, ints):
        self.us, self.ints = list(us), list(ints)
        self.real_empty, self.real_randint = torch.empty, torch.randint

    def empty(self, *shape, **kw):
        draws = self

        class _Slot:
            def uniform_(self, a, b):
                a = torch.as_tensor(a, dtype=torch.float32)
                b = torch.as_tensor(b, dtype=torch.float32)
                return (b - a) * torch.tensor(draws.us.pop(0), dtype=torch.float32) + a

        return _Slot()

    def randint(self, low, high, size=None, **kw):
        return torch.tensor([low + self.ints.pop(0) % (high - low)])


@settings(max_examples=400, deadline=None)
@given(
    h=st.integers(1, 3000),
    w=st.integers(1, 3000),
    s_lo=st.floats(0.01, 1.0),
    s_span=st.floats(0.0, 1.0),
    r_lo=st.floats(0.2, 2.0),
    r_span=st.floats(0.0, 3.0),
    us=uniforms,
    ints=st.lists(st.integers(0, 2**40), min_size=2, max_size=2),
)
def test_crop_parameters_equal_torchvisions_for_the_same_draws(h, w, s_lo, s_span, r_lo, r_span, us, ints):
    scale = (s_lo, min(1.0, s_lo + s_span))
    ratio = (r_lo, r_lo + r_span)
    draws = _Draws(us, ints)
    img = torch.zeros(1, 1, 1, dtype=torch.uint8).expand(3, h, w)
    torch.empty, torch.randint = draws.empty, draws.randint
    try:
        want = RandomResizedCrop.get_params(img, scale, ratio)
    finally:
        torch.empty, torch.randint = draws.real_empty, draws.real_randint
    got = _loaderx.random_resized_params(h, w, scale, ratio, us, ints)
    want = tuple(int(v) for v in want)
    if 0 in want[2:]:
        # torchvision's fallback can round a side to 0 (an empty crop that its resize then
        # refuses); the engine keeps at least one pixel, inside the image.
        top, left, ch, cw = got
        assert (ch, cw) == tuple(max(1, v) for v in want[2:]) and top + ch <= h and left + cw <= w
    else:
        assert got == want


def test_a_batch_matches_torchvisions_v2_resize_of_the_same_crops(tmp_path):
    """ImageDataset's picture of a crop against torchvision v2's ``resized_crop`` (bilinear,
    antialias) of Pillow's decode: the same rectangle gives nearly the same pixels."""
    from PIL import Image
    from torchvision.transforms.v2 import functional as F

    from loaderx.converter import from_images
    from loaderx.dataset import ImageDataset

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:300, 0:400]
    pic = np.stack([(xx * 255 // 399), (yy * 255 // 299), ((xx + yy) % 256)], axis=2).astype(np.uint8)
    pic = np.clip(pic.astype(int) + rng.integers(-20, 21, pic.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pic).save(buf, "PNG")
    from_images(tmp_path / "s", [buf.getvalue()])
    ds = ImageDataset(tmp_path / "s", 96, crop="center")
    got = ds[0].astype(int)
    # centre crop of a 4:3 picture to a square: the middle 300x300.
    want = F.resized_crop(torch.from_numpy(pic).permute(2, 0, 1), 0, 50, 300, 300, [96, 96], antialias=True)
    diff = np.abs(got - want.permute(1, 2, 0).numpy().astype(int))
    assert diff.max() <= 2 and diff.mean() < 0.5, (diff.max(), diff.mean())


def _jpeg_store(tmp_path, n=24):
    from PIL import Image

    from loaderx.converter import from_images

    rng = np.random.default_rng(1)
    items = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
        items.append(buf.getvalue())
    from_images(tmp_path / "jpegs", items)
    return tmp_path / "jpegs"


def test_loaderx_torch_yields_the_loaders_image_batches_as_tensors(tmp_path):
    import loaderx.torch as lt
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import ImageDataset

    ds = ImageDataset(_jpeg_store(tmp_path), 32, crop="random_resized", flip=True)
    base = DataLoader({"image": ds}, batch_size=8, seed=3)
    want = [next(base)["image"] for _ in range(4)]
    base.close()
    tl = torch.utils.data.DataLoader(lt.IterableDataset(DataLoader({"image": ds}, batch_size=8, seed=3)), batch_size=None, num_workers=2)
    got = [b["image"] for _, b in zip(range(4), tl)]
    assert all(isinstance(g, torch.Tensor) and g.dtype == torch.uint8 and g.shape == (8, 32, 32, 3) for g in got)
    assert all(np.array_equal(g.numpy(), w) for g, w in zip(got, want))


def test_loaderx_jax_shards_image_batches(tmp_path):
    jax = pytest.importorskip("jax")
    import loaderx.jax as lxj
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import ImageDataset

    ds = ImageDataset(_jpeg_store(tmp_path), 16, crop="center", flip=True)
    base = DataLoader({"image": ds}, batch_size=8, seed=4)
    want = [next(base)["image"] for _ in range(3)]
    base.close()
    with lxj.DataLoader({"image": ds}, batch_size=8, seed=4) as lx:
        for w in want:
            got = next(lx)["image"]
            assert isinstance(got, jax.Array) and got.shape == (8, 16, 16, 3)
            assert np.array_equal(np.asarray(got), w)
