//! `Mixer`: batches of global indices drawn from several datasets in fixed proportions
//! (`loaderx_core::mix`). The binding converts and maps errors; the rules are core's.

use std::sync::Mutex;

use loaderx_core::mix::{Interpolation, Mixer as CoreMixer, Schedule};
use loaderx_core::sampler::Mode;
use numpy::PyArray1;
use pyo3::prelude::*;

use crate::error::{argument, core_to_py};

#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Mixer {
    inner: Mutex<CoreMixer>,
}

impl Mixer {
    fn lock(&self) -> std::sync::MutexGuard<'_, CoreMixer> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Mixer {
    /// A mix of datasets of `lengths` whose weights follow `points` (`[(step, weights)]`, one
    /// point for constant weights), held between points (`"step"`) or interpolated (`"linear"`).
    #[new]
    fn new(
        lengths: Vec<u64>,
        points: Vec<(u64, Vec<f64>)>,
        interpolation: &str,
        batch: u64,
        mode: u8,
        seed: u64,
    ) -> PyResult<Self> {
        let mode = Mode::try_from(mode).map_err(core_to_py)?;
        let interpolation = match interpolation {
            "step" => Interpolation::Step,
            "linear" => Interpolation::Linear,
            other => {
                return Err(argument(format!("interpolation must be 'step' or 'linear', got {other:?}")))
            }
        };
        let schedule = Schedule::new(points, interpolation, batch).map_err(core_to_py)?;
        let mixer = CoreMixer::scheduled(&lengths, schedule, mode, seed).map_err(core_to_py)?;
        Ok(Mixer { inner: Mutex::new(mixer) })
    }

    /// Records per batch of each dataset at `step`.
    fn counts_at(&self, step: u64) -> Vec<u64> {
        self.lock().schedule().counts_at(step)
    }

    /// The weights at `step`.
    fn weights_at(&self, step: u64) -> Vec<f64> {
        self.lock().schedule().weights_at(step)
    }

    /// Each slot of batch `step`: its dataset, and the position in that dataset's stream.
    fn slots_at<'py>(
        &self,
        py: Python<'py>,
        step: u64,
    ) -> (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>) {
        let (sources, positions): (Vec<u32>, Vec<u64>) = self.lock().slots_at(step).into_iter().unzip();
        (PyArray1::from_vec(py, sources), PyArray1::from_vec(py, positions))
    }

    /// Records per batch of each dataset.
    #[getter]
    fn counts(&self) -> Vec<u64> {
        self.lock().counts()
    }

    #[getter]
    fn batch_len(&self) -> usize {
        self.lock().batch_len()
    }

    /// The global indices of batch `step`.
    fn batch_at<'py>(&self, py: Python<'py>, step: u64) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let mixer = self.lock().clone();
        let mut out = vec![0u64; mixer.batch_len()];
        mixer.batch_at(step, &mut out).map_err(core_to_py)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Where each dataset's stream stands before step `step`.
    fn positions_at(&self, step: u64) -> Vec<u64> {
        self.lock().positions_at(step)
    }

    /// Continue every stream from `positions` at step `step`.
    fn rebase(&self, step: u64, positions: Vec<u64>) -> PyResult<()> {
        self.lock().rebase(step, &positions).map_err(core_to_py)
    }
}
