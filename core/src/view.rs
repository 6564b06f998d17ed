//! How a record's bytes become typed elements for a front end without NumPy (JavaScript).
//!
//! An [`ElementView`] maps a NumPy dtype onto one of JavaScript's typed-array types, with the
//! conversion the bytes need on the way:
//! * native-order integers and floats are used as they are;
//! * big-endian numbers are byte-swapped per component (a complex number swaps each half);
//! * `float16` widens to `float32` (JavaScript has no portable half-precision array);
//! * `bool` is one byte per value (0 or 1), so it stays `Uint8Array`;
//! * datetimes and timedeltas are `int64` counts of their unit;
//! * complex numbers become two floats, bytes/void become their bytes and UCS-4 text its code
//!   points: each adds one trailing dimension ([`ElementView::extra_dim`]).
//!
//! Invariant: [`ElementView::convert`] writes exactly `out_len(src.len())` bytes and never reads
//! past `src`; a source whose length is not a whole number of elements is rejected first.

use crate::dtype::{ByteOrder, DKind, DType};

/// JavaScript's typed-array constructors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrayType {
    Int8,
    Uint8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    BigInt64,
    BigUint64,
    Float32,
    Float64,
}

impl ArrayType {
    /// The constructor's name, e.g. `"Float32Array"`.
    pub fn name(self) -> &'static str {
        match self {
            ArrayType::Int8 => "Int8Array",
            ArrayType::Uint8 => "Uint8Array",
            ArrayType::Int16 => "Int16Array",
            ArrayType::Uint16 => "Uint16Array",
            ArrayType::Int32 => "Int32Array",
            ArrayType::Uint32 => "Uint32Array",
            ArrayType::BigInt64 => "BigInt64Array",
            ArrayType::BigUint64 => "BigUint64Array",
            ArrayType::Float32 => "Float32Array",
            ArrayType::Float64 => "Float64Array",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ArrayType::Int8 | ArrayType::Uint8 => 1,
            ArrayType::Int16 | ArrayType::Uint16 => 2,
            ArrayType::Int32 | ArrayType::Uint32 | ArrayType::Float32 => 4,
            ArrayType::BigInt64 | ArrayType::BigUint64 | ArrayType::Float64 => 8,
        }
    }
}

/// What happens to the bytes between the record and the typed array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Conversion {
    /// The record bytes are the array bytes.
    None,
    /// Reverse the bytes of every `n`-byte component.
    Swap(usize),
    /// IEEE half precision to single precision, from the given byte order.
    HalfToSingle(ByteOrder),
}

/// A dtype as a typed-array view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ElementView {
    /// The typed array the elements land in.
    pub array: ArrayType,
    /// Record bytes per dtype element (NumPy's `itemsize`).
    pub itemsize: usize,
    /// Typed-array elements per dtype element: the trailing dimension added to the shape, or
    /// `None` when one dtype element is one typed-array element.
    pub extra_dim: Option<usize>,
    /// The byte conversion.
    pub conversion: Conversion,
}

impl ElementView {
    /// The view for a dtype. Every parsable dtype has one; types JavaScript cannot hold (128-bit
    /// floats, objects) are shown as their bytes.
    pub fn of(dtype: &DType) -> ElementView {
        let itemsize = dtype.itemsize as usize;
        let swap = |n: usize| {
            if dtype.order == ByteOrder::Big && n > 1 {
                Conversion::Swap(n)
            } else {
                Conversion::None
            }
        };
        let plain =
            |array: ArrayType| ElementView { array, itemsize, extra_dim: None, conversion: swap(itemsize) };
        let bytes = ElementView {
            array: ArrayType::Uint8,
            itemsize,
            extra_dim: Some(itemsize),
            conversion: Conversion::None,
        };
        match (dtype.kind, itemsize) {
            (DKind::Bool, _) | (DKind::UInt, 1) => plain(ArrayType::Uint8),
            (DKind::Int, 1) => plain(ArrayType::Int8),
            (DKind::Int, 2) => plain(ArrayType::Int16),
            (DKind::UInt, 2) => plain(ArrayType::Uint16),
            (DKind::Int, 4) => plain(ArrayType::Int32),
            (DKind::UInt, 4) => plain(ArrayType::Uint32),
            (DKind::Int | DKind::Datetime | DKind::Timedelta, 8) => plain(ArrayType::BigInt64),
            (DKind::UInt, 8) => plain(ArrayType::BigUint64),
            (DKind::Float, 2) => ElementView {
                array: ArrayType::Float32,
                itemsize,
                extra_dim: None,
                conversion: Conversion::HalfToSingle(dtype.order),
            },
            (DKind::Float, 4) => plain(ArrayType::Float32),
            (DKind::Float, 8) => plain(ArrayType::Float64),
            (DKind::Complex, 8 | 16) => {
                let array = if itemsize == 8 { ArrayType::Float32 } else { ArrayType::Float64 };
                ElementView { array, itemsize, extra_dim: Some(2), conversion: swap(itemsize / 2) }
            }
            (DKind::Unicode, n) if n > 0 => ElementView {
                array: ArrayType::Uint32,
                itemsize,
                extra_dim: Some(n / 4),
                conversion: swap(4),
            },
            _ => bytes,
        }
    }

    /// Output bytes for `src_len` record bytes.
    pub fn out_len(&self, src_len: usize) -> usize {
        match self.conversion {
            Conversion::HalfToSingle(_) => src_len * 2,
            _ => src_len,
        }
    }

    /// Whether `len` record bytes hold a whole number of elements.
    pub fn fits(&self, len: usize) -> bool {
        self.itemsize == 0 || len % self.itemsize == 0
    }

    /// Converts record bytes into typed-array bytes (little-endian, as typed arrays on every
    /// supported host). `dst.len()` must be `out_len(src.len())`; `src` must [`fit`](Self::fits).
    pub fn convert(&self, src: &[u8], dst: &mut [u8]) {
        debug_assert_eq!(dst.len(), self.out_len(src.len()));
        match self.conversion {
            Conversion::None => dst.copy_from_slice(src),
            Conversion::Swap(n) => {
                for (d, s) in dst.chunks_exact_mut(n).zip(src.chunks_exact(n)) {
                    for (a, b) in d.iter_mut().zip(s.iter().rev()) {
                        *a = *b;
                    }
                }
            }
            Conversion::HalfToSingle(order) => {
                for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(2)) {
                    let pair = [s[0], s[1]];
                    let bits = if order == ByteOrder::Big {
                        u16::from_be_bytes(pair)
                    } else {
                        u16::from_le_bytes(pair)
                    };
                    d.copy_from_slice(&half::f16::from_bits(bits).to_f32().to_le_bytes());
                }
            }
        }
    }

    /// Converts in place when the conversion keeps the size (everything but half floats).
    /// Returns `false`, leaving `buf` untouched, for conversions that change the size.
    pub fn convert_in_place(&self, buf: &mut [u8]) -> bool {
        match self.conversion {
            Conversion::None => true,
            Conversion::Swap(n) => {
                buf.chunks_exact_mut(n).for_each(<[u8]>::reverse);
                true
            }
            Conversion::HalfToSingle(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(s: &str) -> ElementView {
        ElementView::of(&s.parse().unwrap())
    }

    #[test]
    fn numbers_map_to_their_typed_arrays() {
        assert_eq!(view("|u1").array, ArrayType::Uint8);
        assert_eq!(view("|b1").array, ArrayType::Uint8);
        assert_eq!(view("<i8").array, ArrayType::BigInt64);
        assert_eq!(view("<M8[s]").array, ArrayType::BigInt64);
        assert_eq!(view("<f4").conversion, Conversion::None);
        assert_eq!(view(">i4").conversion, Conversion::Swap(4));
        assert_eq!(
            view(">c16"),
            ElementView {
                array: ArrayType::Float64,
                itemsize: 16,
                extra_dim: Some(2),
                conversion: Conversion::Swap(8)
            }
        );
        assert_eq!(view("|V12").extra_dim, Some(12));
        assert_eq!(view("<U3").extra_dim, Some(3));
        assert_eq!(view("<f16").array, ArrayType::Uint8);
    }

    #[test]
    fn big_endian_is_swapped_per_component() {
        let v = view(">i4");
        let src = [0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe];
        let mut dst = [0u8; 8];
        v.convert(&src, &mut dst);
        assert_eq!(i32::from_le_bytes(dst[..4].try_into().unwrap()), 0x0102);
        assert_eq!(i32::from_le_bytes(dst[4..].try_into().unwrap()), -2);
        let mut inplace = src;
        assert!(v.convert_in_place(&mut inplace));
        assert_eq!(inplace, dst);
    }

    #[test]
    fn half_floats_widen() {
        let v = view("<f2");
        let src: Vec<u8> = [1.0f32, -2.5, 65504.0]
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_bits().to_le_bytes())
            .collect();
        let mut dst = vec![0u8; v.out_len(src.len())];
        v.convert(&src, &mut dst);
        let got: Vec<f32> = dst.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, [1.0, -2.5, 65504.0]);
        assert!(!v.convert_in_place(&mut dst));
    }

    #[test]
    fn fits_whole_elements_only() {
        assert!(view("<i4").fits(8));
        assert!(!view("<i4").fits(6));
    }
}
