//! The core sampler for JavaScript. Indices come back as a `Float64Array`, exact because the
//! length is capped at 2^53.

use loaderx_core::sampler::{Mode, Sampler as CoreSampler};
use wasm_bindgen::prelude::*;

use crate::error::{argument, js};

/// Largest length whose indices a JS number holds exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;
/// Largest batch (16 Mi indices, a 128 MiB `Float64Array`), so a typo cannot exhaust memory.
const MAX_BATCH: usize = 1 << 24;

/// Endless batches of indices into `0..length`; batch `k` depends only on
/// `(length, batchSize, mode, seed, k)`.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Sampler {
    inner: CoreSampler,
    buf: Vec<u64>,
}

#[wasm_bindgen]
impl Sampler {
    /// `mode`: 0 sequential, 1 iid, 2 cyclic.
    #[wasm_bindgen(constructor)]
    pub fn new(length: u64, batch_size: u64, mode: u8, seed: u64) -> Result<Sampler, JsValue> {
        if length > MAX_SAFE {
            return Err(argument("sampler length must be at most 2^53 - 1 in JavaScript"));
        }
        let mode = Mode::try_from(mode).map_err(js)?;
        let inner = CoreSampler::new(length, batch_size, mode, seed).map_err(js)?;
        if inner.batch_len() > MAX_BATCH {
            return Err(argument("sampler batch size must be at most 2^24 in JavaScript"));
        }
        let buf = Vec::new();
        Ok(Sampler { inner, buf })
    }

    /// The batch at the current step; advances the step.
    #[allow(clippy::should_implement_trait)] // JavaScript's name; this is not a Rust iterator.
    pub fn next(&mut self) -> Result<Vec<f64>, JsValue> {
        let step = self.inner.step();
        let out = self.batch_at(step)?;
        self.inner.seek(step.wrapping_add(1));
        Ok(out)
    }

    /// Batch `step`, without moving the cursor.
    #[wasm_bindgen(js_name = batchAt)]
    pub fn batch_at(&mut self, step: u64) -> Result<Vec<f64>, JsValue> {
        let n = self.inner.batch_len();
        self.buf.resize(n, 0);
        let got = self.inner.batch_at(step, &mut self.buf).map_err(js)?;
        Ok(self.buf[..got].iter().map(|&i| i as f64).collect())
    }

    /// Makes the next `next()` return batch `step`.
    pub fn seek(&mut self, step: u64) {
        self.inner.seek(step);
    }

    /// The step the next `next()` returns.
    #[wasm_bindgen(getter)]
    pub fn step(&self) -> u64 {
        self.inner.step()
    }

    /// Indices per batch (`min(batchSize, length)` for cyclic).
    #[wasm_bindgen(getter, js_name = batchLength)]
    pub fn batch_length(&self) -> usize {
        self.inner.batch_len()
    }
}

/// The core mixer for JavaScript (the step inspector's mixed runs): batches of indices into the
/// sources' joined index space, as Python's `MixSampler`.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Mixer {
    inner: loaderx_core::mix::Mixer,
    buf: Vec<u64>,
}

#[wasm_bindgen]
impl Mixer {
    /// `points`: `[[step, [weight, ...]], ...]` (JSON); `interpolation`: `"step"` or `"linear"`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        lengths: Vec<f64>,
        points: &str,
        interpolation: &str,
        batch_size: u64,
        mode: u8,
        seed: u64,
    ) -> Result<Mixer, JsValue> {
        use loaderx_core::mix::{Interpolation, Schedule};
        let lengths = lengths
            .iter()
            .map(|&n| {
                if n >= 0.0 && n.fract() == 0.0 && n <= MAX_SAFE as f64 {
                    Ok(n as u64)
                } else {
                    Err(argument("source lengths must be whole numbers"))
                }
            })
            .collect::<Result<Vec<u64>, _>>()?;
        let points: Vec<(u64, Vec<f64>)> =
            serde_json::from_str(points).map_err(|e| argument(&format!("schedule points: {e}")))?;
        let interpolation = match interpolation {
            "step" => Interpolation::Step,
            "linear" => Interpolation::Linear,
            other => {
                return Err(argument(&format!("interpolation must be 'step' or 'linear', got {other:?}")))
            }
        };
        let mode = Mode::try_from(mode).map_err(js)?;
        let schedule = Schedule::new(points, interpolation, batch_size).map_err(js)?;
        let inner = loaderx_core::mix::Mixer::scheduled(&lengths, schedule, mode, seed).map_err(js)?;
        if inner.batch_len() > MAX_BATCH {
            return Err(argument("batch size must be at most 2^24 in JavaScript"));
        }
        Ok(Mixer { inner, buf: Vec::new() })
    }

    /// Continue each source's stream from `positions` at `step`.
    pub fn rebase(&mut self, step: u64, positions: Vec<f64>) -> Result<(), JsValue> {
        let positions: Vec<u64> = positions.iter().map(|&p| p as u64).collect();
        self.inner.rebase(step, &positions).map_err(js)
    }

    /// Batch `step`.
    #[wasm_bindgen(js_name = batchAt)]
    pub fn batch_at(&mut self, step: u64) -> Result<Vec<f64>, JsValue> {
        self.buf.resize(self.inner.batch_len(), 0);
        let got = self.inner.batch_at(step, &mut self.buf).map_err(js)?;
        Ok(self.buf[..got].iter().map(|&i| i as f64).collect())
    }

    /// Each slot of batch `step` as `[source, stream position]` pairs, flat, in slot order.
    #[wasm_bindgen(js_name = slotsAt)]
    pub fn slots_at(&self, step: u64) -> Vec<f64> {
        self.inner.slots_at(step).into_iter().flat_map(|(j, at)| [f64::from(j), at as f64]).collect()
    }
}

/// The seed of source `j`'s stream (and packer) in a mix seeded `seed`.
#[wasm_bindgen(js_name = mixStreamSeed)]
pub fn mix_stream_seed(seed: u64, j: u32) -> u64 {
    loaderx_core::mix::stream_seed(seed, j as usize)
}
