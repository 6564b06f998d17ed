//! `Recorder`: a loader's metrics (`loaderx_core::metrics`) behind a lock, so worker threads
//! record a step in one call with no Python arithmetic. `loaderx._metrics.Metrics` wraps it.

use std::sync::{Mutex, MutexGuard};

use loaderx_core::metrics::{Marks, Recorder as CoreRecorder, Summary, STAGES};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Recorder {
    inner: Mutex<CoreRecorder>,
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, CoreRecorder> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn summary<'py>(py: Python<'py>, s: Summary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("count", s.count)?;
    d.set_item("total", s.total)?;
    d.set_item("p50", s.p50)?;
    d.set_item("p95", s.p95)?;
    d.set_item("p99", s.p99)?;
    d.set_item("max", s.max)?;
    Ok(d)
}

/// A count carried as a float (marks cross processes as one tuple of floats).
fn count(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        x as u64
    } else {
        0
    }
}

#[pymethods]
impl Recorder {
    /// A recorder; with `trace`, it keeps up to `max_events` trace events.
    #[new]
    fn new(trace: bool, max_events: usize) -> Self {
        Recorder { inner: Mutex::new(CoreRecorder::new(trace, max_events)) }
    }

    /// A `next()` from `start` to `end` (seconds) that found `ready` batches ready.
    fn waited(&self, start: f64, end: f64, ready: u64, step: u64) {
        self.lock().waited(start, end, ready, step);
    }

    /// A step on worker track `track`: `marks` as `loaderx._metrics.produce_timed` makes them.
    fn step(&self, step: u64, marks: (f64, f64, f64, f64, f64, f64, f64, f64, f64), nbytes: u64, track: u32) {
        let (start, sampled, read, transformed, decode, rb, nb, hits, misses) = marks;
        let marks = Marks {
            start,
            sampled,
            read,
            transformed,
            decode,
            read_bytes: count(rb),
            network_bytes: count(nb),
            cache_hits: count(hits),
            cache_misses: count(misses),
        };
        self.lock().step(step, &marks, nbytes, track);
    }

    /// Starts counting anew (the trace keeps its events).
    fn reset(&self) {
        self.lock().reset();
    }

    /// The metrics as a dict of plain numbers.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (wait, r_ready, r_stages, bytes, r_io) = {
            let r = self.lock();
            (r.wait.summary(), r.ready, r.stages.each_ref().map(|h| h.summary()), r.bytes, r.io)
        };
        let out = PyDict::new(py);
        out.set_item("next", summary(py, wait)?)?;
        let calls = wait.count;
        let ready = PyDict::new(py);
        ready.set_item("mean", if calls > 0 { r_ready.total as f64 / calls as f64 } else { 0.0 })?;
        ready.set_item("min", r_ready.min.unwrap_or(0))?;
        ready.set_item("max", r_ready.max)?;
        ready.set_item("none", r_ready.none)?;
        out.set_item("ready", ready)?;
        let stages = PyDict::new(py);
        for (name, s) in STAGES.iter().zip(r_stages) {
            stages.set_item(*name, summary(py, s)?)?;
        }
        out.set_item("stages", stages)?;
        out.set_item("bytes", bytes)?;
        let io = PyDict::new(py);
        io.set_item("read_bytes", r_io.read_bytes)?;
        io.set_item("network_bytes", r_io.network_bytes)?;
        let cache = PyDict::new(py);
        let (hits, misses) = (r_io.cache_hits, r_io.cache_misses);
        cache.set_item("hits", hits)?;
        cache.set_item("misses", misses)?;
        let asked = hits + misses;
        cache.set_item("hit_ratio", (asked > 0).then(|| hits as f64 / asked as f64))?;
        io.set_item("cache", cache)?;
        out.set_item("io", io)?;
        Ok(out)
    }

    /// The trace events kept: `(name, track, start, end, step)`, `name` a stage or "wait".
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let events = self.lock().events().to_vec();
        let rows = events.iter().map(|e| {
            let name = e.stage.and_then(|k| STAGES.get(usize::from(k)).copied()).unwrap_or("wait");
            (name, e.track, e.start, e.end, e.step)
        });
        PyList::new(py, rows)
    }

    /// True when trace events were dropped past the cap.
    #[getter]
    fn dropped(&self) -> bool {
        self.lock().dropped()
    }
}
