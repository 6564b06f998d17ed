//! `loaderx._loaderx.Schema`: core's `schema.msgpack` map for Python, so the package parses,
//! merges, compares and writes schemas with the same code as every other front end and never
//! touches msgpack itself.
//!
//! Values cross the boundary as plain Python objects: `None`, `bool`, `int` (within i64 or u64),
//! `float`, `str`, `bytes`, lists (and tuples) and dicts. Anything else in a caller's schema is
//! a `TypeError` before anything is written.

use std::path::PathBuf;

use loaderx_core::schema::{Kind, Layout, Schema as CoreSchema, SchemaError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use rmpv::Value;

use crate::error::{core_to_py, to_py};

/// Deepest nesting accepted from Python (as from disk).
const MAX_DEPTH: usize = loaderx_core::schema::MAX_DEPTH;

fn to_value(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    let unsupported = || {
        PyTypeError::new_err(format!(
            "schema cannot be saved as msgpack: {} values are not supported",
            obj.get_type().name().map_or_else(|_| "these".into(), |n| n.to_string())
        ))
    };
    if depth > MAX_DEPTH {
        return Err(PyTypeError::new_err("schema cannot be saved as msgpack: nested too deeply"));
    }
    if obj.is_none() {
        return Ok(Value::Nil);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Boolean(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        return obj
            .extract::<u64>()
            .map(Value::from)
            .map_err(|_| PyTypeError::new_err("schema cannot be saved as msgpack: integer out of range"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::F64(f.value()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::from(s.to_cow()?.as_ref()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Binary(b.as_bytes().to_vec()));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        return obj
            .try_iter()?
            .map(|item| to_value(&item?, depth + 1))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let pairs = d.iter().map(|(k, v)| Ok((to_value(&k, depth + 1)?, to_value(&v, depth + 1)?)));
        return pairs.collect::<PyResult<_>>().map(Value::Map);
    }
    Err(unsupported())
}

fn to_py_value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Nil => py.None().into_bound(py),
        Value::Boolean(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (_, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => py.None().into_bound(py),
        },
        Value::F32(f) => PyFloat::new(py, f64::from(*f)).into_any(),
        Value::F64(f) => PyFloat::new(py, *f).into_any(),
        Value::String(s) => match s.as_str() {
            Some(s) => PyString::new(py, s).into_any(),
            None => PyBytes::new(py, s.as_bytes()).into_any(),
        },
        Value::Binary(b) | Value::Ext(_, b) => PyBytes::new(py, b).into_any(),
        Value::Array(items) => {
            PyList::new(py, items.iter().map(|x| to_py_value(py, x)).collect::<PyResult<Vec<_>>>()?)?
                .into_any()
        }
        Value::Map(pairs) => {
            let d = PyDict::new(py);
            for (k, x) in pairs {
                d.set_item(to_py_value(py, k)?, to_py_value(py, x)?)?;
            }
            d.into_any()
        }
    })
}

fn kind(name: &str) -> PyResult<Kind> {
    name.parse().map_err(|e: SchemaError| PyValueError::new_err(e.to_string()))
}

/// A store's schema (`schema.msgpack`): an ordered map.
#[pyclass(frozen, module = "loaderx._loaderx")]
#[derive(Clone)]
pub(crate) struct Schema {
    inner: CoreSchema,
}

#[pymethods]
impl Schema {
    /// The schema of the store at `path`, or None when it has none. A schema that does not
    /// parse is a `CorruptStoreError` naming the file.
    #[staticmethod]
    fn read(py: Python<'_>, path: PathBuf) -> PyResult<Option<Schema>> {
        let schema = py.detach(|| loaderx_native::read_schema(&path)).map_err(to_py)?;
        Ok(schema.map(|inner| Schema { inner }))
    }

    /// A schema from msgpack bytes.
    #[staticmethod]
    fn parse(bytes: &[u8]) -> PyResult<Schema> {
        CoreSchema::from_msgpack(bytes).map(|inner| Schema { inner }).map_err(core_to_py)
    }

    /// A converter's schema: the caller's dict (or None), with `kind` set and `format`,
    /// `version` and `codec` added where absent. `TypeError` for values msgpack cannot hold.
    #[staticmethod]
    #[pyo3(signature = (user, kind_name, codec))]
    fn for_converter(user: Option<&Bound<'_, PyDict>>, kind_name: &str, codec: &str) -> PyResult<Schema> {
        let base = match user {
            Some(d) => {
                let Value::Map(pairs) = to_value(d.as_any(), 0)? else {
                    return Err(PyTypeError::new_err("a schema must be a dict"));
                };
                let mut schema = CoreSchema::default();
                for (k, v) in pairs {
                    let Value::String(k) = k else {
                        return Err(PyTypeError::new_err("schema keys must be strings"));
                    };
                    let k = k.into_str().ok_or_else(|| PyTypeError::new_err("schema keys must be UTF-8"))?;
                    schema.set(&k, v);
                }
                schema
            }
            None => CoreSchema::default(),
        };
        Ok(Schema { inner: CoreSchema::merge_user(base, kind(kind_name)?, codec) })
    }

    /// A dense or ragged schema in the canonical key order.
    #[staticmethod]
    fn new(kind_name: &str, dtype: &str, item_shape: Vec<u64>, codec: &str) -> PyResult<Schema> {
        Ok(Schema { inner: CoreSchema::new(kind(kind_name)?, dtype, &item_shape, codec) })
    }

    /// Checks what a reader requires (`format`, `kind` (equal to `kind_name` if given), `dtype`,
    /// `item_shape`); a schema read from a store that fails is a `CorruptStoreError`.
    #[pyo3(signature = (kind_name = None))]
    fn validate(&self, kind_name: Option<&str>) -> PyResult<()> {
        let expected = kind_name.map(kind).transpose()?;
        self.inner.validate(expected).map_err(core_to_py)
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_msgpack())
    }

    /// The map as a dict, in key order.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.inner.entries() {
            d.set_item(k, to_py_value(py, v)?)?;
        }
        Ok(d)
    }

    #[getter]
    fn kind(&self) -> PyResult<&'static str> {
        self.inner.kind().map(Kind::as_str).map_err(core_to_py)
    }

    #[getter]
    fn dtype(&self) -> PyResult<String> {
        self.inner.dtype_str().map(str::to_owned).map_err(core_to_py)
    }

    #[getter]
    fn item_shape(&self) -> PyResult<Vec<u64>> {
        self.inner.item_shape().map_err(core_to_py)
    }

    /// `codec`, or None when the schema does not say.
    #[getter]
    fn codec(&self) -> Option<String> {
        self.inner.codec().ok().map(str::to_owned)
    }

    /// Bytes per item (dense record, ragged row): `prod(item_shape) · itemsize`.
    #[getter]
    fn item_bytes(&self) -> PyResult<u64> {
        self.inner.item_bytes().map_err(core_to_py)
    }

    fn __eq__(&self, other: &Schema) -> bool {
        self.inner == other.inner
    }

    fn __repr__(&self) -> String {
        let keys: Vec<&str> = self.inner.entries().iter().map(|(k, _)| k.as_str()).collect();
        format!("Schema({})", keys.join(", "))
    }
}

impl From<CoreSchema> for Schema {
    fn from(inner: CoreSchema) -> Schema {
        Schema { inner }
    }
}

impl Schema {
    /// The core schema.
    pub(crate) fn core(&self) -> &CoreSchema {
        &self.inner
    }

    /// The layout records must fit (`loaderx_core::schema::Layout`).
    pub(crate) fn layout(&self) -> PyResult<Layout> {
        Layout::of(&self.inner).map_err(core_to_py)
    }
}
