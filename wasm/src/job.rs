//! Decodes that run on the thread pool while the calling thread goes back to its event loop
//! (threaded build only): [`Reader::decode_start`] hands a plan's input buffer to the pool and
//! returns a [`DecodeJob`] at once; JavaScript allocates the output buffer meanwhile, waits on
//! the job's flag with `Atomics.waitAsync`, collects the job with [`Reader::decode_finish`] and
//! copies the output out of the plan (where `decodeInputKept` leaves its output too).
//!
//! Invariants: a job owns everything its decode reads (the input bytes, copies of the plan's
//! slots and ranges, the shared dictionary), so freeing the plan or the reader while it runs is
//! harmless; the flag turns 1 only after the result is stored, and is then woken with
//! `Atomics.notify`; no path panics.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use loaderx_core::read::ReadError;
use wasm_bindgen::prelude::*;

use crate::error::argument;
use crate::reader::{decode_pieces, piece_bounds, Plan, Reader};

#[wasm_bindgen(
    inline_js = "export function wake(memory, address) { Atomics.notify(new Int32Array(memory.buffer), address >>> 2); }"
)]
extern "C" {
    /// Wakes the `Atomics.waitAsync` on the i32 at `address` (runs on the pool thread's realm).
    fn wake(memory: JsValue, address: usize);
}

type Outcome = (Vec<u8>, Vec<Result<(), ReadError>>);

#[derive(Debug, Default)]
struct JobState {
    /// 0 while the decode runs, 1 once `outcome` holds its result.
    done: AtomicI32,
    outcome: Mutex<Option<Outcome>>,
}

/// A decode running on the thread pool.
#[wasm_bindgen]
#[derive(Debug)]
pub struct DecodeJob {
    state: Arc<JobState>,
}

#[wasm_bindgen]
impl DecodeJob {
    /// Address in wasm memory of an i32 that is 0 while the decode runs and 1 once it is done
    /// (`Atomics.waitAsync(new Int32Array(wasmMemory().buffer, address, 1), 0, 0)`).
    #[wasm_bindgen(js_name = flagAddress)]
    pub fn flag_address(&self) -> usize {
        self.state.done.as_ptr() as usize
    }

    /// Whether the decode is done.
    #[wasm_bindgen(getter)]
    pub fn done(&self) -> bool {
        self.state.done.load(Ordering::Acquire) == 1
    }
}

#[wasm_bindgen]
impl Reader {
    /// Starts decoding a plan from its input buffer (filled in place after `inputAddress`, or
    /// given with `setInput`) on the thread pool, and returns at once. `got` is as for `decode`.
    #[wasm_bindgen(js_name = decodeStart)]
    pub fn decode_start(&self, plan: &mut Plan, got: &[f64]) -> Result<DecodeJob, JsValue> {
        let input = std::mem::take(&mut plan.input);
        let bounds = piece_bounds(&plan.inner.ranges, input.len(), got)?;
        let (slots, ranges) = (plan.inner.slots.clone(), plan.inner.ranges.clone());
        let (dict, view, expected) = (self.dict.clone(), plan.view, plan.expected.clone());
        let state = Arc::new(JobState::default());
        let job = DecodeJob { state: Arc::clone(&state) };
        rayon::spawn(move || {
            let outcome =
                decode_pieces(&slots, &ranges, &input, &bounds, dict.as_deref(), view.as_ref(), &expected);
            if let Ok(mut slot) = state.outcome.lock() {
                *slot = Some(outcome);
            }
            state.done.store(1, Ordering::Release);
            wake(wasm_bindgen::memory(), state.done.as_ptr() as usize);
        });
        Ok(job)
    }

    /// Collects a finished job: a failed record fails the call, or is set aside in a lenient
    /// plan; the output goes to the plan (`Plan.outputAddress`) for JavaScript to copy into a
    /// buffer it allocated while the pool decoded. Each job's output is collected once.
    #[wasm_bindgen(js_name = decodeFinish)]
    pub fn decode_finish(&self, plan: &mut Plan, job: &DecodeJob) -> Result<(), JsValue> {
        if !job.done() {
            return Err(argument("the decode is still running (wait for its flag)"));
        }
        let outcome = job.state.outcome.lock().ok().and_then(|mut o| o.take());
        let (out, results) = outcome.ok_or_else(|| argument("this decode's output was already collected"))?;
        plan.settle(results)?;
        plan.output = out;
        Ok(())
    }
}
