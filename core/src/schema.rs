//! `schema.msgpack`: the store's schema map, and the NumPy dtype strings it names.
//!
//! Invariants:
//! * A [`Schema`] is an ordered map with string keys. Key order and unknown keys survive
//!   [`Schema::from_msgpack`] → [`Schema::to_msgpack`], and the bytes match the reference writer's
//!   (strings as msgpack str, integers in their most compact form). [`Schema::new`] writes the
//!   canonical order `kind, dtype, item_shape, format, version, codec`.
//! * A duplicated key keeps its first position and its last value, as a Python dict would.
//! * Decoding never panics, rejects trailing bytes and nesting deeper than [`MAX_DEPTH`], and
//!   allocates only in proportion to the input.
//! * Accessors check types and report a typed [`SchemaError`]; `version` is never checked.
//! * Dtype strings are parsed by [`crate::dtype`].

use std::collections::BTreeMap;
use std::io::Cursor;
use std::str::FromStr;

use rmpv::Value;
use serde::ser::{Serialize, SerializeMap, Serializer};
use thiserror::Error;

pub use crate::dtype::{ByteOrder, DKind, DType, MAX_ITEMSIZE};

/// The schema's file name in a store directory (named in [`crate::names`]).
pub use crate::names::SCHEMA_FILE;
/// The `format` value of every loaderx schema.
pub const FORMAT: &str = "loaderx-zrecord";
/// The `version` value written by [`Schema::new`] and [`Schema::merge_user`].
pub const VERSION: u64 = 1;
/// Deepest nesting of arrays and maps accepted in `schema.msgpack`.
pub const MAX_DEPTH: usize = 32;
pub use crate::error::SchemaError;

/// Dense stores hold fixed-size items; ragged stores hold a variable number of rows per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `"dense"`
    Dense,
    /// `"ragged"`
    Ragged,
}

impl Kind {
    /// The schema spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dense => "dense",
            Self::Ragged => "ragged",
        }
    }
}

impl FromStr for Kind {
    type Err = SchemaError;

    fn from_str(s: &str) -> Result<Self, SchemaError> {
        match s {
            "dense" => Ok(Self::Dense),
            "ragged" => Ok(Self::Ragged),
            other => Err(SchemaError::UnknownKind(other.to_owned())),
        }
    }
}

/// An order-preserving schema map. See the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    entries: Vec<(String, Value)>,
}

impl Schema {
    /// A schema in the canonical key order, with `format` and `version` filled in.
    pub fn new(kind: Kind, dtype: &str, item_shape: &[u64], codec: &str) -> Self {
        let shape = item_shape.iter().map(|&d| Value::from(d)).collect();
        let entries = [
            ("kind", Value::from(kind.as_str())),
            ("dtype", Value::from(dtype)),
            ("item_shape", Value::Array(shape)),
            ("format", Value::from(FORMAT)),
            ("version", Value::from(VERSION)),
            ("codec", Value::from(codec)),
        ];
        Self { entries: entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect() }
    }

    /// Decodes `schema.msgpack`: exactly one msgpack map with string keys.
    pub fn from_msgpack(bytes: &[u8]) -> Result<Self, SchemaError> {
        let mut de = rmp_serde::Deserializer::new(Cursor::new(bytes));
        de.set_max_depth(MAX_DEPTH);
        let value = serde::Deserialize::deserialize(&mut de)
            .map_err(|e: rmp_serde::decode::Error| SchemaError::Decode(e.to_string()))?;
        let trailing = (bytes.len() as u64).saturating_sub(de.position());
        if trailing != 0 {
            return Err(SchemaError::Decode(format!("{trailing} bytes after the schema map")));
        }
        let Value::Map(pairs) = value else {
            return Err(SchemaError::NotAMap);
        };
        let mut schema = Self::default();
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for (key, value) in pairs {
            let Value::String(key) = key else {
                let why = format!("map key {key} is not a string");
                return Err(SchemaError::Decode(why));
            };
            let key = key.into_str().ok_or_else(|| SchemaError::Decode("key is not UTF-8".into()))?;
            match index.get(&key) {
                Some(&i) => schema.entries[i].1 = value,
                None => {
                    index.insert(key.clone(), schema.entries.len());
                    schema.entries.push((key, value));
                }
            }
        }
        Ok(schema)
    }

    /// Encodes the map in its key order.
    pub fn to_msgpack(&self) -> Vec<u8> {
        // Writing to a Vec cannot fail, and every rmpv::Value has a msgpack encoding.
        rmp_serde::to_vec(&Entries(&self.entries)).expect("a schema always encodes")
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Replaces the value under `key` in place, or appends the key at the end.
    pub fn set(&mut self, key: &str, value: Value) {
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, slot)) => *slot = value,
            None => self.entries.push((key.to_owned(), value)),
        }
    }

    /// The string under `key`, if there is one and it is a string (`media`, user keys).
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    fn str_field(&self, key: &'static str) -> Result<&str, SchemaError> {
        let value = self.get(key).ok_or(SchemaError::MissingKey(key))?;
        value.as_str().ok_or(SchemaError::WrongType { key, expected: "a string" })
    }

    /// `kind`, parsed.
    pub fn kind(&self) -> Result<Kind, SchemaError> {
        self.str_field("kind")?.parse()
    }

    /// `dtype`, as written.
    pub fn dtype_str(&self) -> Result<&str, SchemaError> {
        self.str_field("dtype")
    }

    /// `dtype`, parsed.
    pub fn dtype(&self) -> Result<DType, SchemaError> {
        self.dtype_str()?.parse()
    }

    /// `codec`, as written (not checked against the known codecs).
    pub fn codec(&self) -> Result<&str, SchemaError> {
        self.str_field("codec")
    }

    /// `item_shape`: an array of non-negative integers.
    pub fn item_shape(&self) -> Result<Vec<u64>, SchemaError> {
        let key = "item_shape";
        let wrong = SchemaError::WrongType { key, expected: "an array of non-negative integers" };
        let dims = self.get(key).ok_or(SchemaError::MissingKey(key))?;
        let dims = dims.as_array().ok_or_else(|| wrong.clone())?;
        dims.iter().map(|d| d.as_u64().ok_or_else(|| wrong.clone())).collect()
    }

    /// Bytes per item: `prod(item_shape) · itemsize`.
    pub fn item_bytes(&self) -> Result<u64, SchemaError> {
        let itemsize = self.dtype()?.itemsize;
        let shape = self.item_shape()?;
        shape.iter().try_fold(itemsize, |acc, &d| acc.checked_mul(d)).ok_or(SchemaError::Overflow)
    }

    /// What a reader requires: `format` is `"loaderx-zrecord"`, `kind` parses (and equals
    /// `expected_kind` if given), `dtype` and `item_shape` parse and their item size fits a u64 and is at least 1 byte.
    pub fn validate(&self, expected_kind: Option<Kind>) -> Result<(), SchemaError> {
        let format = self.str_field("format")?;
        if format != FORMAT {
            return Err(SchemaError::WrongFormat(format.to_owned()));
        }
        let kind = self.kind()?;
        if let Some(expected) = expected_kind.filter(|&e| e != kind) {
            let found = kind.as_str().to_owned();
            return Err(SchemaError::WrongKind { expected: expected.as_str(), found });
        }
        match self.item_bytes()? {
            0 => Err(SchemaError::EmptyItem),
            _ => Ok(()),
        }
    }

    /// Whether both schemas describe the same records: equal kind, dtype string and item_shape.
    /// A schema missing any of the three is compatible with nothing.
    pub fn compatible(&self, other: &Schema) -> bool {
        let key = |s: &Schema| Some((s.kind().ok()?, s.dtype_str().ok()?.to_owned(), s.item_shape().ok()?));
        matches!((key(self), key(other)), (Some(a), Some(b)) if a == b)
    }

    /// Overlays `other` on this schema: its keys replace values in place, new keys go last (a
    /// Python `{**self, **other}`). How a converter appending to a store keeps its schema.
    pub fn update(&mut self, other: Schema) {
        for (key, value) in other.entries {
            self.set(&key, value);
        }
    }

    /// A converter's schema from a user-supplied one: the user's keys first and in their order,
    /// then `kind` set, and `format`, `version`, `codec` added only where absent.
    pub fn merge_user(user: Schema, kind: Kind, codec: &str) -> Schema {
        let mut merged = user;
        merged.set("kind", Value::from(kind.as_str()));
        let defaults = [("format", Value::from(FORMAT)), ("version", Value::from(VERSION))];
        for (key, value) in defaults.into_iter().chain([("codec", Value::from(codec))]) {
            if merged.get(key).is_none() {
                merged.set(key, value);
            }
        }
        merged
    }
}

/// The one rule for whether a record fits its store's schema: a dense record is exactly one
/// item of `item_bytes`; a ragged record is a whole number of such items (rows). An item of 0
/// bytes fits nothing, since records are at least 1 byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub kind: Kind,
    /// `prod(item_shape) · itemsize`.
    pub item_bytes: u64,
}

/// A record that does not fit its schema ([`Layout::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("record {index} is {len} bytes, which does not fit the schema ({why})")]
pub struct Misfit {
    pub index: u64,
    pub len: u64,
    pub why: String,
}

impl crate::error::Classify for Misfit {
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::ErrorKind::Corrupt
    }

    /// The table entry, whose length disagrees with the schema.
    fn location(&self) -> Option<crate::error::Location> {
        let at = crate::format::entry_offset(self.index);
        Some(crate::error::Location::at(crate::error::StoreFile::Meta, at))
    }

    fn index(&self) -> Option<u64> {
        Some(self.index)
    }
}

impl Layout {
    /// The layout a schema describes.
    pub fn of(schema: &Schema) -> Result<Layout, SchemaError> {
        Ok(Layout { kind: schema.kind()?, item_bytes: schema.item_bytes()? })
    }

    /// Whether record `index` of `len` bytes fits.
    pub fn check(&self, index: u64, len: u64) -> Result<(), Misfit> {
        let item = self.item_bytes;
        let why = match self.kind {
            Kind::Dense if len != item => format!("a dense item is {item} bytes"),
            Kind::Ragged if item == 0 || len % item != 0 => format!("not a whole number of {item}-byte rows"),
            _ => return Ok(()),
        };
        Err(Misfit { index, len, why })
    }
}

/// Serializes entries as one msgpack map, in order.
struct Entries<'a>(&'a [(String, Value)]);

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn layout_is_the_one_fit_rule() {
        let dense = Layout { kind: Kind::Dense, item_bytes: 12 };
        assert_eq!(dense.check(0, 12), Ok(()));
        assert_eq!(dense.check(4, 24).unwrap_err().index, 4);
        let ragged = Layout { kind: Kind::Ragged, item_bytes: 12 };
        assert_eq!(ragged.check(0, 36), Ok(()));
        let misfit = ragged.check(7, 30).unwrap_err();
        assert_eq!((misfit.index, misfit.len), (7, 30));
        assert!(misfit.to_string().contains("12-byte rows"), "{misfit}");
        assert!(Layout { kind: Kind::Ragged, item_bytes: 0 }.check(0, 1).is_err());
        let schema = Schema::new(Kind::Ragged, "<f4", &[3], "zstd");
        assert_eq!(Layout::of(&schema), Ok(ragged));
    }

    #[test]
    fn update_keeps_the_existing_order_and_takes_new_values() {
        let mut existing = Schema::new(Kind::Dense, "<f4", &[3], "zstd");
        existing.set("note", Value::from("old"));
        let user = Schema::from_msgpack(
            &rmp_serde::to_vec(&BTreeMap::from([("note", "new"), ("zz", "x")])).unwrap(),
        )
        .unwrap();
        existing.update(Schema::merge_user(user, Kind::Dense, "raw"));
        let keys: Vec<&str> = existing.entries().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["kind", "dtype", "item_shape", "format", "version", "codec", "note", "zz"]);
        assert_eq!(existing.get("note").and_then(Value::as_str), Some("new"));
        assert_eq!(existing.codec(), Ok("raw"), "the call's codec fills the user's schema, then wins");
    }

    use super::*;
    use proptest::prelude::*;

    const U8_28X28_RAW: &[u8] = b"\x86\xa4kind\xa5dense\xa5dtype\xa3|u1\xaaitem_shape\x92\x1c\x1c\
        \xa6format\xafloaderx-zrecord\xa7version\x01\xa5codec\xa3raw";

    fn keys(s: &Schema) -> String {
        let keys: Vec<&str> = s.entries().iter().map(|(k, _)| k.as_str()).collect();
        keys.join(" ")
    }

    fn is_decode_error(bytes: &[u8]) -> bool {
        matches!(Schema::from_msgpack(bytes), Err(SchemaError::Decode(_)))
    }

    #[test]
    fn canonical_schema_encodes_to_the_reference_bytes() {
        let schema = Schema::new(Kind::Dense, "|u1", &[28, 28], "raw");
        assert_eq!(U8_28X28_RAW.len(), 78);
        assert_eq!(schema.to_msgpack(), U8_28X28_RAW);
        let back = Schema::from_msgpack(U8_28X28_RAW).unwrap();
        assert_eq!(back, schema);
        assert_eq!(back.validate(Some(Kind::Dense)), Ok(()));
        assert_eq!(back.item_bytes(), Ok(784));
        assert_eq!(back.codec(), Ok("raw"));
        let big = Schema::new(Kind::Ragged, "<i4", &[1 << 20, 70_000, 300], "zstd");
        assert_eq!(Schema::from_msgpack(&big.to_msgpack()).unwrap(), big);
        let found = "dense".to_owned();
        let wrong = SchemaError::WrongKind { expected: "ragged", found };
        assert_eq!(back.validate(Some(Kind::Ragged)), Err(wrong));
    }

    #[test]
    fn every_dtype_string_from_the_format_round_trips() {
        let listed = "|u1 <f4 <i8 |b1 <f2 >i4 <c8 <U2 <M8[s] |V12 |V5 |S3";
        let more = "<m8[ns] |O <M8 <m8[10ms] |S0 <f16 >U1 <c16 |i1 >u8";
        for s in listed.split(' ').chain(more.split(' ')) {
            let dtype: DType = s.parse().unwrap();
            assert_eq!(dtype.to_numpy_str(), s);
        }
        let u2: DType = "<U2".parse().unwrap();
        assert_eq!((u2.kind, u2.itemsize), (DKind::Unicode, 8));
        assert!(!">i4".parse::<DType>().unwrap().is_native_order());
        assert!("|V12".parse::<DType>().unwrap().is_native_order());
        let aliases = [("u1", "|u1"), (">u1", "|u1"), ("=f8", "<f8"), ("|f4", "<f4"), ("O8", "|O")];
        for (alias, canonical) in aliases {
            assert_eq!(alias.parse::<DType>().unwrap().to_numpy_str(), canonical);
        }
    }

    #[test]
    fn garbage_dtype_strings_are_errors() {
        let garbage = "< x4 <i3 <i0 <f0 |b2 <M8[parsec] <M8[s <f4[s] <i |S99999999999 <U999999999 \
            |V2147483648 <M8[0s] <M4 <i4x";
        for s in garbage.split(' ').chain(["", "|u1 "]) {
            assert!(matches!(s.parse::<DType>(), Err(SchemaError::BadDType(_))), "{s:?}");
        }
    }

    #[test]
    fn unknown_keys_and_order_survive_a_round_trip() {
        let mut s = Schema::default();
        s.set("zeta", Value::from(-3));
        s.set("dtype", Value::from("<f4"));
        let nested = vec![Value::Nil, Value::F64(0.5), Value::Ext(7, vec![1, 2])];
        s.set("nested", Value::Array(nested));
        s.set("item_shape", Value::Array(vec![]));
        s.set("blob", Value::Binary(vec![0, 255]));
        s.set("zeta", Value::from(u64::MAX));
        let bytes = s.to_msgpack();
        let back = Schema::from_msgpack(&bytes).unwrap();
        assert_eq!(keys(&back), "zeta dtype nested item_shape blob");
        assert_eq!(back.to_msgpack(), bytes);
        assert_eq!(back.get("zeta"), Some(&Value::from(u64::MAX)));
        assert_eq!(back.item_bytes(), Ok(4)); // scalar items
        assert_eq!(back.kind(), Err(SchemaError::MissingKey("kind")));
        assert_eq!(back.validate(None), Err(SchemaError::MissingKey("format")));
    }

    #[test]
    fn merge_user_keeps_user_keys_first() {
        let mut user = Schema::default();
        user.set("dtype", Value::from("<i4"));
        user.set("item_shape", Value::Array(vec![Value::from(3)]));
        user.set("extra", Value::from("x"));
        let merged = Schema::merge_user(user.clone(), Kind::Ragged, "zstd");
        assert_eq!(keys(&merged), "dtype item_shape extra kind format version codec");
        assert_eq!(merged.kind(), Ok(Kind::Ragged));
        assert_eq!(merged.codec(), Ok("zstd"));
        user.set("codec", Value::from("raw"));
        user.set("kind", Value::from("dense"));
        let merged = Schema::merge_user(user, Kind::Ragged, "zstd");
        assert_eq!(keys(&merged), "dtype item_shape extra codec kind format version");
        assert_eq!(merged.kind(), Ok(Kind::Ragged));
        assert_eq!(merged.codec(), Ok("raw"));
        assert!(merged.compatible(&Schema::new(Kind::Ragged, "<i4", &[3], "raw")));
        assert!(!merged.compatible(&Schema::new(Kind::Ragged, "<i4", &[4], "raw")));
        assert!(!Schema::default().compatible(&Schema::default()));
    }

    #[test]
    fn bad_schemas_are_typed_errors() {
        assert!(is_decode_error(b"")); // empty
        assert!(is_decode_error(b"\x80\x00")); // trailing byte
        assert!(is_decode_error(b"\x81\x01\x02")); // integer key
        assert!(is_decode_error(b"\xdf\xff\xff\xff\xff")); // map of 2^32 - 1 entries, no data
        assert!(is_decode_error(&[0x91; 100_000])); // nested too deep
        assert_eq!(Schema::from_msgpack(b"\x92\x01\x02"), Err(SchemaError::NotAMap));
        let dup = Schema::from_msgpack(b"\x82\xa1a\x01\xa1a\x02").unwrap();
        assert_eq!(dup.entries(), [("a".to_owned(), Value::from(2))]);
        let mut s = Schema::new(Kind::Dense, "<f8", &[u64::MAX, 2], "raw");
        assert_eq!(s.item_bytes(), Err(SchemaError::Overflow));
        s.set("item_shape", Value::Array(vec![Value::from(-1)]));
        let wrong = s.item_shape().unwrap_err();
        assert!(matches!(wrong, SchemaError::WrongType { key: "item_shape", .. }));
        s.set("format", Value::from("zarr"));
        let wrong_format = SchemaError::WrongFormat("zarr".into());
        assert_eq!(s.validate(None), Err(wrong_format));
        s.set("kind", Value::from(1));
        assert!(matches!(s.kind(), Err(SchemaError::WrongType { key: "kind", .. })));
        s.set("kind", Value::from("sparse"));
        assert!(matches!(s.kind(), Err(SchemaError::UnknownKind(_))));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(s) = Schema::from_msgpack(&bytes) {
                let _ = (s.validate(None), s.item_bytes(), s.dtype(), s.to_msgpack());
            }
        }

        #[test]
        fn mutated_schemas_never_panic(pos in 0usize..78, byte: u8) {
            let mut bytes = U8_28X28_RAW.to_vec();
            bytes[pos] = byte;
            if let Ok(s) = Schema::from_msgpack(&bytes) {
                let _ = (s.validate(Some(Kind::Dense)), s.item_bytes(), s.to_msgpack());
            }
        }

        #[test]
        fn dtype_strings_never_panic(s in "[<>|=]?[a-zA-Z]?[0-9]{0,12}(\\[[0-9a-z]{0,4}\\]?)?") {
            if let Ok(d) = s.parse::<DType>() {
                prop_assert_eq!(d.to_numpy_str().parse::<DType>().unwrap(), d);
            }
        }
    }
}
