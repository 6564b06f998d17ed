//! `Mask`: an exclusion mask (`loaderx_core::mask`): parsed, written, checked against a store's
//! identity, and the kept records' rank/select map the DataLoader samples through. The binding
//! converts and maps errors; the rules are core's.

use loaderx_core::mask::{identity_text, Kept, Mask as CoreMask};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::{argument, core_to_py};
use crate::handle::U64s;

/// An exclusion mask and the index of the records it keeps.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Mask {
    mask: CoreMask,
    kept: Kept,
}

fn identity_of(bytes: &[u8]) -> PyResult<[u8; 32]> {
    bytes.try_into().map_err(|_| argument(format!("a store identity is 32 bytes, got {}", bytes.len())))
}

impl Mask {
    /// The index of the kept records (for a packer over them).
    pub(crate) fn kept_index(&self) -> &Kept {
        &self.kept
    }
}

fn with_kept(mask: CoreMask) -> PyResult<Mask> {
    let kept = mask.kept().map_err(core_to_py)?;
    Ok(Mask { mask, kept })
}

#[pymethods]
impl Mask {
    /// Parses a mask file's bytes.
    #[new]
    fn new(bytes: &[u8]) -> PyResult<Self> {
        with_kept(CoreMask::from_bytes(bytes).map_err(core_to_py)?)
    }

    /// A mask over `length` records of the store with `identity`, excluding `indices`.
    #[staticmethod]
    fn build(length: u64, identity: &[u8], indices: U64s<'_>) -> PyResult<Self> {
        let idx = indices.as_slice()?;
        with_kept(CoreMask::new(length, identity_of(identity)?, idx.iter().copied()).map_err(core_to_py)?)
    }

    /// The mask file's bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.mask.to_bytes())
    }

    /// Refuses (BadArgumentError) a store of another length or identity.
    fn check(&self, length: u64, identity: &[u8]) -> PyResult<()> {
        self.mask.check(length, &identity_of(identity)?).map_err(core_to_py)
    }

    /// Records kept by the mask at `idxs` of the kept records' index space (each < `kept`).
    fn select<'py>(&self, py: Python<'py>, idxs: U64s<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let mut out = idxs.as_slice()?.to_vec();
        if let Some(&bad) = out.iter().find(|&&i| i >= self.kept.count()) {
            return Err(argument(format!(
                "kept index {bad} is not below the {} kept records",
                self.kept.count()
            )));
        }
        self.kept.map(&mut out);
        Ok(PyArray1::from_vec(py, out))
    }

    /// Whether each record of `idxs` is excluded.
    fn excluded_at<'py>(&self, py: Python<'py>, idxs: U64s<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let out: Vec<bool> = idxs.as_slice()?.iter().map(|&i| self.mask.is_excluded(i)).collect();
        Ok(PyArray1::from_vec(py, out))
    }

    /// Records of the store the mask is for.
    #[getter]
    fn length(&self) -> u64 {
        self.mask.length()
    }

    /// Records excluded.
    #[getter]
    fn excluded(&self) -> u64 {
        self.mask.excluded()
    }

    /// Records kept.
    #[getter]
    fn kept(&self) -> u64 {
        self.kept.count()
    }

    /// The store identity (`sha256:<hex>`) the mask is for.
    #[getter]
    fn identity(&self) -> String {
        identity_text(self.mask.identity())
    }
}
