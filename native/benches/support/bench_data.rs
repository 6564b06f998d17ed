//! The benchmarks' record bytes, shared by `benches/gather.rs` and `examples/ab_gather.rs`
//! (included there by path): a xorshift generator, bytes that zstd compresses about 1.08x (like
//! the product's benchmark data), and stores filled with them.

use loaderx_native::{Codec, Store};

/// A xorshift64 generator: fast, reproducible from its seed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random bytes with one in seven forced to zero: entropy coding gets about 1.08x.
pub(crate) fn mild_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.next()).map(|x| if x.is_multiple_of(7) { 0 } else { (x >> 32) as u8 }).collect()
}

/// Appends `n` records of `rec` such bytes to each store of `stores` (with its codec), about
/// `block` bytes at a time, handing each block to `also` as well.
pub(crate) fn fill(
    rng: &mut Rng,
    stores: &[(&Store, Codec)],
    (rec, n, block): (usize, u64, usize),
    mut also: impl FnMut(&[u8]),
) {
    let per_append = (block / rec).max(1);
    let mut written = 0u64;
    while written < n {
        let k = per_append.min((n - written) as usize);
        let buf = mild_bytes(rng, k * rec);
        let offsets: Vec<u64> = (0..k as u64).map(|i| i * rec as u64).collect();
        for (store, codec) in stores {
            store.append(&buf, &offsets, *codec).unwrap();
        }
        also(&buf);
        written += k as u64;
    }
}
