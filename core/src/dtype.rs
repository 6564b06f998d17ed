//! NumPy dtype strings (`np.dtype.str`), as `schema.msgpack` records them.
//!
//! Invariant: a [`DType`] parses only well-formed strings with item sizes up to
//! [`MAX_ITEMSIZE`], and [`DType::to_numpy_str`] gives back NumPy's canonical spelling.

use std::str::FromStr;

use crate::error::SchemaError;

/// Largest dtype item size accepted (NumPy keeps item sizes in a C `int`).
pub const MAX_ITEMSIZE: u64 = i32::MAX as u64;

/// Byte order of a dtype, as NumPy's first character spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`
    Little,
    /// `>`
    Big,
    /// `|`: single bytes, strings of bytes, void and object.
    NotApplicable,
}

/// The dtype kind; each discriminant is NumPy's kind character.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DKind {
    Bool = b'b',
    Int = b'i',
    UInt = b'u',
    Float = b'f',
    Complex = b'c',
    Bytes = b'S',
    /// UCS-4 text: the item size is 4 bytes per character.
    Unicode = b'U',
    Void = b'V',
    Datetime = b'M',
    Timedelta = b'm',
    Object = b'O',
}

impl DKind {
    fn from_char(c: char) -> Option<Self> {
        use DKind::*;
        let kinds = [Bool, Int, UInt, Float, Complex, Bytes, Unicode, Void, Datetime, Timedelta];
        kinds.into_iter().chain([Object]).find(|&k| char::from(k as u8) == c)
    }
}

/// Datetime and timedelta units NumPy accepts inside `[...]`, optionally after a multiplier.
const TIME_UNITS: [&str; 13] = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"];

/// A parsed NumPy array-protocol type string such as `<f4`, `|V12` or `<M8[s]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DType {
    /// Byte order; `|` when it does not apply.
    pub order: ByteOrder,
    /// Kind.
    pub kind: DKind,
    /// Bytes per element (for `U`, 4 per character).
    pub itemsize: u64,
    /// Datetime/timedelta unit inside the brackets, such as `s` or `10ms`; `None` if generic.
    pub unit: Option<String>,
}

const NATIVE: ByteOrder = if cfg!(target_endian = "big") { ByteOrder::Big } else { ByteOrder::Little };

impl DType {
    /// Whether elements can be read without swapping bytes on this machine.
    pub fn is_native_order(&self) -> bool {
        self.order == ByteOrder::NotApplicable || self.order == NATIVE
    }

    /// NumPy's `dtype.str` spelling; parsing it gives back this value.
    pub fn to_numpy_str(&self) -> String {
        let order = match self.order {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::NotApplicable => '|',
        };
        let kind = char::from(self.kind as u8);
        let unit = self.unit.as_ref().map(|u| format!("[{u}]"));
        let unit = unit.unwrap_or_default();
        match self.kind {
            DKind::Object => format!("{order}O"),
            DKind::Unicode => format!("{order}U{}{unit}", self.itemsize / 4),
            _ => format!("{order}{kind}{}{unit}", self.itemsize),
        }
    }
}

impl FromStr for DType {
    type Err = SchemaError;

    fn from_str(s: &str) -> Result<Self, SchemaError> {
        let shown: String = s.chars().take(40).collect();
        let bad = |why: &str| SchemaError::BadDType(format!("{shown:?}: {why}"));
        let (order_char, rest) = match s.chars().next() {
            Some(c @ ('<' | '>' | '|' | '=')) => (Some(c), &s[1..]),
            _ => (None, s),
        };
        let mut chars = rest.chars();
        let kind_char = chars.next().ok_or_else(|| bad("no kind character"))?;
        let kind = DKind::from_char(kind_char).ok_or_else(|| bad("unknown kind character"))?;
        let rest = chars.as_str();
        let (digits, tail) = rest.split_at(rest.bytes().take_while(u8::is_ascii_digit).count());
        let too_large = || bad("size too large");
        let count = match digits {
            "" => None,
            d => Some(d.parse().ok().filter(|&n| n <= MAX_ITEMSIZE).ok_or_else(too_large)?),
        };
        let itemsize = match (kind, count) {
            (DKind::Bool, Some(1)) => 1,
            (DKind::Int | DKind::UInt, Some(n @ (1 | 2 | 4 | 8))) => n,
            (DKind::Float, Some(n @ (2 | 4 | 8 | 12 | 16))) => n,
            (DKind::Complex, Some(n @ (8 | 16 | 24 | 32))) => n,
            (DKind::Datetime | DKind::Timedelta, Some(8)) => 8,
            (DKind::Object, None | Some(8)) => 8,
            (DKind::Bytes | DKind::Void, n) => n.unwrap_or(0),
            (DKind::Unicode, n) => {
                let bytes = n.unwrap_or(0).checked_mul(4).filter(|&b| b <= MAX_ITEMSIZE);
                bytes.ok_or_else(too_large)?
            }
            _ => return Err(bad("item size not valid for this kind")),
        };
        let unit = match (kind, tail) {
            (_, "") => None,
            (DKind::Datetime | DKind::Timedelta, t) => {
                let inner = t.strip_prefix('[').and_then(|t| t.strip_suffix(']'));
                let inner = inner.ok_or_else(|| bad("unit must be in brackets"))?;
                let base = inner.trim_start_matches(|c: char| c.is_ascii_digit());
                let multiplier_ok = inner.len() == base.len() || !inner.starts_with('0');
                if !(TIME_UNITS.contains(&base) && multiplier_ok) {
                    return Err(bad("unknown time unit"));
                }
                Some(inner.to_owned())
            }
            _ => return Err(bad("unexpected characters after the size")),
        };
        let order_applies = match kind {
            DKind::Int | DKind::UInt => itemsize > 1,
            DKind::Float | DKind::Complex | DKind::Unicode => true,
            DKind::Datetime | DKind::Timedelta => true,
            DKind::Bool | DKind::Bytes | DKind::Void | DKind::Object => false,
        };
        let order = match (order_applies, order_char) {
            (false, _) => ByteOrder::NotApplicable,
            (true, Some('<')) => ByteOrder::Little,
            (true, Some('>')) => ByteOrder::Big,
            (true, _) => NATIVE,
        };
        Ok(Self { order, kind, itemsize, unit })
    }
}
