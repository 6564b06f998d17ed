//! The benchmarks' record bytes, shared by `benches/gather.rs` and `examples/ab_gather.rs`
//! (included there by path): a xorshift generator and bytes that zstd compresses about 1.08x,
//! like the product's benchmark data.

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
