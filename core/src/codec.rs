//! Per-record compression: raw, zstd (level 3) and zstd with the store's trained dictionary
//! (level 19).
//!
//! Invariants:
//! * Encoding applies the reference's raw-fallback rule: a record is stored compressed only if
//!   its frame fits in a buffer the size of the record itself; otherwise it is stored raw. So a
//!   stored record is never larger than the data, and nothing under 25 bytes is compressed.
//! * Decoding writes straight into the caller's slice, which has exactly the record's logical
//!   length; a frame that decodes to any other size is an error, never a partial fill.
//! * [`Encoder`] and [`Decoder`] own one zstd context each and are meant to be kept per thread
//!   (or per shard) and reused across records. A [`Dictionary`] is immutable and shared.

use std::cell::RefCell;
use std::sync::OnceLock;

use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

use crate::format::{Codec, MAX_RECORD_LEN};

/// zstd level for [`Codec::Zstd`].
pub const ZSTD_LEVEL: i32 = 3;
/// zstd level for [`Codec::ZstdDict`].
pub const ZSTD_DICT_LEVEL: i32 = 19;
/// Magic number at the start of a trained (ZDICT) dictionary.
pub const DICT_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

/// Errors from encoding, decoding and dictionary training.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The stored bytes are not a valid frame, or decode to more than the logical length.
    #[error("stored record failed to decode: {0}")]
    Decode(String),
    /// The frame decoded to fewer bytes than the table entry says.
    #[error("stored record decoded to {actual} bytes, expected {expected}")]
    LengthMismatch { expected: usize, actual: usize },
    /// A zstd_dict record, but the store has no dictionary.
    #[error("the record needs the store's dictionary (dict.zr), and the store has none")]
    NoDictionary,
    /// The store's dictionary cannot be loaded by zstd.
    #[error("the store's dictionary (dict.zr) is unusable: {0}")]
    BadDictionary(String),
    /// zstd could not set up a compression context.
    #[error("zstd compression failed: {0}")]
    Compress(String),
    /// ZDICT training failed, usually because there were too few or too small samples.
    #[error("dictionary training failed (too few or too small samples?): {0}")]
    Training(String),
}

impl crate::error::Classify for CodecError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            CodecError::Decode(_) | CodecError::LengthMismatch { .. } => ErrorKind::Corrupt,
            _ => ErrorKind::Dictionary,
        }
    }
}

/// A store's zstd dictionary (`dict.zr`), loaded once and shared by every thread.
pub struct Dictionary {
    bytes: Vec<u8>,
    decoder: Result<DecoderDictionary<'static>, String>,
    encoder: OnceLock<Result<EncoderDictionary<'static>, String>>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary").field("len", &self.bytes.len()).field("id", &self.id()).finish()
    }
}

impl Dictionary {
    /// Wraps dictionary bytes exactly as stored in `dict.zr`. Never fails: a dictionary zstd
    /// cannot load is reported when a record needs it.
    pub fn new(bytes: Vec<u8>) -> Dictionary {
        let decoder = DecoderDictionary::try_copy(&bytes).map_err(|e| e.to_string());
        Dictionary { bytes, decoder, encoder: OnceLock::new() }
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The dictionary ID from a ZDICT header, if the bytes carry one.
    pub fn id(&self) -> Option<u32> {
        dict_id(&self.bytes)
    }

    fn decoder(&self) -> Result<&DecoderDictionary<'static>, CodecError> {
        self.decoder.as_ref().map_err(|e| CodecError::BadDictionary(e.clone()))
    }

    fn encoder(&self) -> Result<&EncoderDictionary<'static>, CodecError> {
        self.encoder
            .get_or_init(|| {
                EncoderDictionary::try_copy(&self.bytes, ZSTD_DICT_LEVEL).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| CodecError::BadDictionary(e.clone()))
    }
}

/// The dictionary ID of ZDICT-format dictionary bytes.
pub fn dict_id(bytes: &[u8]) -> Option<u32> {
    match bytes {
        [a, b, c, d, i0, i1, i2, i3, ..] if [*a, *b, *c, *d] == DICT_MAGIC => {
            Some(u32::from_le_bytes([*i0, *i1, *i2, *i3]))
        }
        _ => None,
    }
}

/// Most records a converter trains a dictionary on.
pub const DICT_MAX_SAMPLES: usize = 8192;

/// The converters' training set: up to [`DICT_MAX_SAMPLES`] evenly spaced records of `records`
/// (NumPy's `unique(linspace(0, n - 1, k).astype(int64))`, so the dictionary is byte-identical
/// to the reference's), concatenated, with their sizes.
pub fn dict_training_set(records: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
    let n = records.len();
    let k = n.min(DICT_MAX_SAMPLES);
    let mut picks: Vec<usize> = match k {
        0 => Vec::new(),
        1 => vec![0],
        _ => {
            let step = (n - 1) as f64 / (k - 1) as f64;
            // NumPy computes k·step and sets the last point to the stop exactly.
            (0..k).map(|i| if i == k - 1 { n - 1 } else { (i as f64 * step) as usize }).collect()
        }
    };
    picks.dedup();
    let sizes: Vec<usize> = picks.iter().map(|&i| records[i].len()).collect();
    let mut samples = Vec::with_capacity(sizes.iter().sum());
    for &i in &picks {
        samples.extend_from_slice(records[i]);
    }
    (samples, sizes)
}

/// The converter's dictionary size rule: 1% of the sample bytes, clamped to 8 KiB..=1 MiB.
pub fn auto_dict_size(sample_bytes: u64) -> usize {
    (sample_bytes / 100).clamp(8 << 10, MAX_RECORD_LEN) as usize
}

/// Trains a dictionary of at most `capacity` bytes on concatenated `samples` whose lengths are
/// `sizes` (ZDICT, byte-identical to the reference for the same input).
#[cfg(feature = "train")]
pub fn train_dictionary(samples: &[u8], sizes: &[usize], capacity: usize) -> Result<Vec<u8>, CodecError> {
    if sizes.is_empty() || capacity == 0 {
        return Err(CodecError::Training("no samples or a zero capacity".into()));
    }
    zstd::dict::from_continuous(samples, sizes, capacity).map_err(|e| CodecError::Training(e.to_string()))
}

/// How a record ended up stored.
#[derive(Debug, PartialEq, Eq)]
pub enum Encoded {
    /// Stored as the input bytes (raw requested, or compression did not shrink it).
    Raw,
    /// Stored as this frame, with this codec.
    Compressed(Codec, Vec<u8>),
}

/// A reusable compression context (one per thread).
pub struct Encoder<'d> {
    dict: Option<&'d Dictionary>,
    plain: Option<Compressor<'d>>,
    with_dict: Option<Compressor<'d>>,
}

impl std::fmt::Debug for Encoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").field("dict", &self.dict).finish_non_exhaustive()
    }
}

impl<'d> Encoder<'d> {
    /// A context for a store with, or without, a dictionary. zstd contexts are created on first use.
    pub fn new(dict: Option<&'d Dictionary>) -> Self {
        Encoder { dict, plain: None, with_dict: None }
    }

    /// Encodes one record with `codec`, applying the raw-fallback rule.
    pub fn encode(&mut self, record: &[u8], codec: Codec) -> Result<Encoded, CodecError> {
        let ctx = match codec {
            Codec::Raw => return Ok(Encoded::Raw),
            Codec::Zstd => match &mut self.plain {
                Some(c) => c,
                slot => slot.insert(Compressor::new(ZSTD_LEVEL).map_err(compress_err)?),
            },
            Codec::ZstdDict => match &mut self.with_dict {
                Some(c) => c,
                slot => {
                    let dict = self.dict.ok_or(CodecError::NoDictionary)?.encoder()?;
                    slot.insert(Compressor::with_prepared_dictionary(dict).map_err(compress_err)?)
                }
            },
        };
        // The frame must fit in as many bytes as the record: a `Vec`'s capacity bounds zstd's
        // output, and a capacity above `len` is cut back by the length check.
        let mut frame = Vec::with_capacity(record.len());
        match ctx.compress_to_buffer(record, &mut frame) {
            Ok(n) if n <= record.len() => Ok(Encoded::Compressed(codec, frame)),
            _ => Ok(Encoded::Raw),
        }
    }
}

fn compress_err(e: std::io::Error) -> CodecError {
    CodecError::Compress(e.to_string())
}

thread_local! {
    /// The plain zstd decompression context of this thread, reused by every [`Decoder`] on it,
    /// so cutting a batch into many small blocks costs no context setup.
    static PLAIN_DECOMPRESSOR: RefCell<Option<Decompressor<'static>>> = const { RefCell::new(None) };
}

/// A decompression context for one shard of work. Plain zstd uses the thread's context; a
/// dictionary context is created on first use.
pub struct Decoder<'d> {
    dict: Option<&'d Dictionary>,
    with_dict: Option<Decompressor<'d>>,
}

impl std::fmt::Debug for Decoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").field("dict", &self.dict).finish_non_exhaustive()
    }
}

impl<'d> Decoder<'d> {
    /// A context for a store with, or without, a dictionary. zstd contexts are created on first use.
    pub fn new(dict: Option<&'d Dictionary>) -> Self {
        Decoder { dict, with_dict: None }
    }

    /// Decodes `stored` (as written with `codec`) into `dst`, whose length is the record's
    /// logical length. On error `dst` holds unspecified bytes.
    pub fn decode_into(&mut self, codec: Codec, stored: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
        let ctx = match codec {
            Codec::Raw => {
                if stored.len() != dst.len() {
                    return Err(CodecError::LengthMismatch { expected: dst.len(), actual: stored.len() });
                }
                copy_record(dst, stored);
                return Ok(());
            }
            Codec::Zstd => {
                return PLAIN_DECOMPRESSOR.with_borrow_mut(|slot| {
                    let ctx = match slot {
                        Some(c) => c,
                        None => slot.insert(Decompressor::new().map_err(decode_err)?),
                    };
                    decompress_exact(ctx, stored, dst)
                })
            }
            Codec::ZstdDict => match &mut self.with_dict {
                Some(c) => c,
                slot => {
                    let dict = self.dict.ok_or(CodecError::NoDictionary)?.decoder()?;
                    slot.insert(Decompressor::with_prepared_dictionary(dict).map_err(decode_err)?)
                }
            },
        };
        decompress_exact(ctx, stored, dst)
    }
}

/// Decompresses into `dst`, which must come out exactly full.
fn decompress_exact(ctx: &mut Decompressor<'_>, stored: &[u8], dst: &mut [u8]) -> Result<(), CodecError> {
    let n = ctx.decompress_to_buffer(stored, dst).map_err(decode_err)?;
    if n != dst.len() {
        return Err(CodecError::LengthMismatch { expected: dst.len(), actual: n });
    }
    Ok(())
}

/// Copies a raw record into place.
///
/// glibc copies large blocks with `rep movsb`, which on some CPUs (AMD Zen among them) runs about
/// 2.5x slower when the destination sits a little past the source modulo 4 KiB, as a freshly
/// allocated NumPy array (16 bytes past a page boundary) does against a page-aligned record.
/// Copying in pieces below glibc's `rep movsb` threshold takes its vector loop instead, which has
/// no such penalty; other alignments keep the single call.
pub fn copy_record(dst: &mut [u8], src: &[u8]) {
    const PIECE: usize = 2048;
    let relative = (dst.as_ptr() as usize).wrapping_sub(src.as_ptr() as usize) % 4096;
    if src.len() <= PIECE || relative == 0 || relative > 1024 {
        dst.copy_from_slice(src);
        return;
    }
    // Opaque to the optimiser, so the loop is not fused back into one large memcpy.
    let piece = std::hint::black_box(PIECE);
    for (d, s) in dst.chunks_mut(piece).zip(src.chunks(piece)) {
        d.copy_from_slice(s);
    }
}

fn decode_err(e: std::io::Error) -> CodecError {
    CodecError::Decode(e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn training_set_picks_like_numpy_linspace() {
        let recs: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; usize::from(i) + 1]).collect();
        let refs: Vec<&[u8]> = recs.iter().map(Vec::as_slice).collect();
        let (samples, sizes) = dict_training_set(&refs);
        assert_eq!(sizes, (1..=10).collect::<Vec<_>>(), "fewer records than the cap: all of them");
        assert_eq!(samples.len(), 55);
        let many: Vec<&[u8]> = vec![b"ab".as_slice(); 20_000];
        let (_, sizes) = dict_training_set(&many);
        assert_eq!(sizes.len(), DICT_MAX_SAMPLES);
        assert_eq!(dict_training_set(&[]).1, Vec::<usize>::new());
        assert_eq!(dict_training_set(&[b"x".as_slice()]).1, vec![1]);
    }

    use super::*;

    fn roundtrip(codec: Codec, dict: Option<&Dictionary>, record: &[u8]) -> (Codec, usize) {
        let mut enc = Encoder::new(dict);
        let mut dec = Decoder::new(dict);
        let (used, stored) = match enc.encode(record, codec).unwrap() {
            Encoded::Raw => (Codec::Raw, record.to_vec()),
            Encoded::Compressed(c, frame) => (c, frame),
        };
        assert!(stored.len() <= record.len());
        let mut out = vec![0u8; record.len()];
        dec.decode_into(used, &stored, &mut out).unwrap();
        assert_eq!(out, record);
        (used, stored.len())
    }

    #[test]
    fn zstd_frame_of_1000_zeros_matches_reference_bytes() {
        let mut enc = Encoder::new(None);
        let Encoded::Compressed(Codec::Zstd, frame) = enc.encode(&[0u8; 1000], Codec::Zstd).unwrap() else {
            panic!("1000 zeros must compress");
        };
        let expected = [
            0x28, 0xb5, 0x2f, 0xfd, 0x60, 0xe8, 0x02, 0x4d, 0x00, 0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0xe3,
            0x2b, 0x80, 0x05,
        ];
        assert_eq!(frame, expected);
    }

    #[test]
    fn raw_fallback_threshold_matches_reference() {
        assert_eq!(roundtrip(Codec::Zstd, None, &[0u8; 25]), (Codec::Zstd, 17));
        assert_eq!(roundtrip(Codec::Zstd, None, &[0u8; 24]).0, Codec::Raw);
        assert_eq!(roundtrip(Codec::Zstd, None, &7u64.to_le_bytes()).0, Codec::Raw);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        assert_eq!(roundtrip(Codec::Zstd, None, &noise).0, Codec::Raw);
        assert_eq!(roundtrip(Codec::Raw, None, &[1u8; 100]), (Codec::Raw, 100));
    }

    #[test]
    fn decode_checks_logical_length() {
        let mut enc = Encoder::new(None);
        let Encoded::Compressed(_, frame) = enc.encode(&[3u8; 500], Codec::Zstd).unwrap() else { panic!() };
        let mut dec = Decoder::new(None);
        let mut short = vec![0u8; 499];
        assert!(matches!(dec.decode_into(Codec::Zstd, &frame, &mut short), Err(CodecError::Decode(_))));
        let mut long = vec![0u8; 501];
        assert_eq!(
            dec.decode_into(Codec::Zstd, &frame, &mut long),
            Err(CodecError::LengthMismatch { expected: 501, actual: 500 })
        );
        let mut ok = vec![0u8; 500];
        dec.decode_into(Codec::Zstd, &frame, &mut ok).unwrap();
        assert!(dec.decode_into(Codec::Zstd, &frame[..frame.len() - 1], &mut ok).is_err());
        assert!(dec.decode_into(Codec::Raw, &[1, 2], &mut ok).is_err());
    }

    #[test]
    fn dict_codec_requires_a_dictionary() {
        let mut enc = Encoder::new(None);
        assert_eq!(enc.encode(&[0u8; 100], Codec::ZstdDict), Err(CodecError::NoDictionary));
        let mut dec = Decoder::new(None);
        assert_eq!(
            dec.decode_into(Codec::ZstdDict, &[0u8; 10], &mut [0u8; 10]),
            Err(CodecError::NoDictionary)
        );
    }

    #[cfg(feature = "train")]
    #[test]
    fn trained_dictionary_roundtrips_and_carries_its_id() {
        let records: Vec<Vec<u8>> = (0..400u32)
            .map(|i| format!("{{\"user\": {i}, \"name\": \"name-{}\", \"flag\": true}}", i * 7).into_bytes())
            .collect();
        let sizes: Vec<usize> = records.iter().map(Vec::len).collect();
        let samples = records.concat();
        let bytes = train_dictionary(&samples, &sizes, 4096).unwrap();
        let dict = Dictionary::new(bytes);
        assert!(dict.id().is_some());
        let (codec, len) = roundtrip(Codec::ZstdDict, Some(&dict), &records[3]);
        assert_eq!(codec, Codec::ZstdDict);
        assert!(len < records[3].len());
        // A plain zstd record in a store with a dictionary does not use it.
        assert_eq!(roundtrip(Codec::Zstd, Some(&dict), &[9u8; 300]).0, Codec::Zstd);
        assert!(train_dictionary(&[], &[], 4096).is_err());
    }

    #[test]
    fn garbage_dictionary_fails_on_use_not_on_load() {
        let dict = Dictionary::new(vec![1, 2, 3]);
        let mut dec = Decoder::new(Some(&dict));
        assert!(dec.decode_into(Codec::ZstdDict, &[0u8; 10], &mut [0u8; 10]).is_err());
    }

    #[test]
    fn copy_record_copies_every_alignment() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut big = vec![0u8; 30_000];
        for shift in [0usize, 1, 16, 100, 2048, 4095] {
            for len in [1usize, 2048, 2049, 5000, 19_000] {
                let dst = &mut big[shift..shift + len];
                copy_record(dst, &src[..len]);
                assert_eq!(dst, &src[..len], "shift {shift} len {len}");
            }
        }
    }

    #[test]
    fn auto_dict_size_rule() {
        assert_eq!(auto_dict_size(0), 8192);
        assert_eq!(auto_dict_size(2000 * 784), 15680);
        assert_eq!(auto_dict_size(5000 * 784), 39200);
        assert_eq!(auto_dict_size(u64::MAX), 1 << 20);
    }
}
