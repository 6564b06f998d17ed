"""loaderx: a record store with zero-copy batch gathering and an endless data loader.

The public API is imported from its layer, as in loaderx 0.9.11:

    from loaderx.converter  import from_numpy, from_iterator
    from loaderx.dataset    import DenseDataset, RaggedDataset, pad
    from loaderx.dataloader import DataLoader
    from loaderx.sampler    import Sampler
    from loaderx.zrecord    import Zrecord, ZrecordError

``converter`` writes stores from NumPy arrays or iterables, ``dataset`` reads them as typed
arrays, ``dataloader`` is the deterministic step-based pipeline, ``sampler`` draws the indices
and ``zrecord`` is the raw byte-record store. Exceptions live in ``loaderx.errors``.
The engine is Rust (``loaderx._loaderx``).
"""

from ._loaderx import __version__ as __version__  # the workspace version in Cargo.toml
