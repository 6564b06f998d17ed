//! Printing records: typed values through the schema's element view, or bytes without one.
//!
//! Invariant: values are formatted from the element view's little-endian output, so big-endian
//! and half-precision stores print the numbers NumPy shows.

use loaderx_core::dtype::{DKind, DType};
use loaderx_core::view::{ArrayType, ElementView};
use serde_json::{json, Value};

/// How to read a store's records.
pub(crate) struct Shape {
    pub(crate) dtype: Option<DType>,
    pub(crate) view: Option<ElementView>,
    pub(crate) item_shape: Vec<u64>,
}

impl Shape {
    /// A record's shape: the item shape for dense records, `[rows, ...item_shape]` for ragged
    /// ones, `[bytes]` without a schema.
    pub(crate) fn of(&self, len: usize, dense: bool) -> Vec<u64> {
        let Some(view) = self.view else { return vec![len as u64] };
        if dense {
            return self.item_shape.clone();
        }
        let per_row = self.item_shape.iter().product::<u64>() * view.itemsize as u64;
        let rows = (len as u64).checked_div(per_row).unwrap_or(0);
        std::iter::once(rows).chain(self.item_shape.iter().copied()).collect()
    }

    /// The record's values as JSON (numbers, strings for text and bytes; NaN and infinities as
    /// strings), at most `limit` of them.
    pub(crate) fn values(&self, record: &[u8], limit: usize) -> Vec<Value> {
        let (Some(dtype), Some(view)) = (&self.dtype, &self.view) else {
            return record.iter().take(limit).map(|&b| json!(b)).collect();
        };
        if !view.fits(record.len()) {
            return record.iter().take(limit).map(|&b| json!(b)).collect();
        }
        let mut le = vec![0u8; view.out_len(record.len())];
        view.convert(record, &mut le);
        match dtype.kind {
            DKind::Unicode => {
                let chars = view.extra_dim.unwrap_or(1).max(1);
                le.chunks_exact(4 * chars)
                    .take(limit)
                    .map(|item| {
                        let text: String = item
                            .chunks_exact(4)
                            .filter_map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                            .take_while(|&c| c != '\0')
                            .collect();
                        json!(text)
                    })
                    .collect()
            }
            DKind::Bytes => le
                .chunks_exact(view.itemsize.max(1))
                .take(limit)
                .map(|item| json!(item.escape_ascii().to_string()))
                .collect(),
            _ => numbers(view.array, &le, limit),
        }
    }
}

fn float(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!(x.to_string())
    }
}

fn numbers(array: ArrayType, le: &[u8], limit: usize) -> Vec<Value> {
    let each = |n: usize| le.chunks_exact(n).take(limit);
    match array {
        ArrayType::Int8 => each(1).map(|c| json!(c[0] as i8)).collect(),
        ArrayType::Uint8 => each(1).map(|c| json!(c[0])).collect(),
        ArrayType::Int16 => each(2).map(|c| json!(i16::from_le_bytes([c[0], c[1]]))).collect(),
        ArrayType::Uint16 => each(2).map(|c| json!(u16::from_le_bytes([c[0], c[1]]))).collect(),
        ArrayType::Int32 => {
            each(4).map(|c| json!(i32::from_le_bytes(c.try_into().unwrap_or_default()))).collect()
        }
        ArrayType::Uint32 => {
            each(4).map(|c| json!(u32::from_le_bytes(c.try_into().unwrap_or_default()))).collect()
        }
        ArrayType::BigInt64 => {
            each(8).map(|c| json!(i64::from_le_bytes(c.try_into().unwrap_or_default()))).collect()
        }
        ArrayType::BigUint64 => {
            each(8).map(|c| json!(u64::from_le_bytes(c.try_into().unwrap_or_default()))).collect()
        }
        ArrayType::Float32 => {
            each(4).map(|c| float(f64::from(f32::from_le_bytes(c.try_into().unwrap_or_default())))).collect()
        }
        ArrayType::Float64 => {
            each(8).map(|c| float(f64::from_le_bytes(c.try_into().unwrap_or_default()))).collect()
        }
    }
}

/// One line of text for a record: its shape and its first values.
pub(crate) fn line(index: u64, shape: &[u64], values: &[Value], total: usize) -> String {
    let text: Vec<String> =
        values.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), |s| format!("{s:?}"))).collect();
    let more = if total > values.len() { format!(", … ({total} values)") } else { String::new() };
    format!("{index}: shape {shape:?} [{}{more}]", text.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(dtype: &str, item: &[u64]) -> Shape {
        let d: DType = dtype.parse().unwrap();
        Shape { view: Some(ElementView::of(&d)), dtype: Some(d), item_shape: item.to_vec() }
    }

    #[test]
    fn big_endian_and_half_values_print_as_numbers() {
        assert_eq!(
            shape(">i4", &[]).values(&[0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe], 10),
            vec![json!(258), json!(-2)]
        );
        // -2.5 in IEEE half precision is 0xC100.
        assert_eq!(shape("<f2", &[]).values(&[0x00, 0xc1], 10), vec![json!(-2.5)]);
        assert_eq!(shape("<f8", &[]).values(&f64::NAN.to_le_bytes(), 10), vec![json!("NaN")]);
    }

    #[test]
    fn text_and_shapes() {
        let s = shape("<U2", &[]);
        let rec: Vec<u8> = ['h', 'i', 'a', '\0'].iter().flat_map(|&c| (c as u32).to_le_bytes()).collect();
        assert_eq!(s.values(&rec, 10), vec![json!("hi"), json!("a")]);
        assert_eq!(shape("<f4", &[3]).of(24, false), vec![2, 3]);
        assert_eq!(shape("<f4", &[3]).of(12, true), vec![3]);
    }
}
