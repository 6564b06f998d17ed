//! `Images`: batches of pictures rendered from a store of encoded images
//! (`loaderx_native::images`, core's `image` module), and the header reads the converter and the
//! tool use. The binding converts and maps errors; the rules are core's.

use loaderx_core::image::{self, Crop, Header, ImageError, Limits, Render, Resize};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;

use crate::error::argument;
use crate::handle::{Handle, U64s};

/// A render spec: output size, crop, resize, flip probability and pixel limit.
#[pyclass(frozen, module = "loaderx._loaderx")]
pub(crate) struct Images {
    spec: Render,
}

fn spec_error(e: ImageError) -> PyErr {
    argument(e.to_string())
}

#[pymethods]
impl Images {
    #[new]
    #[pyo3(signature = (height, width, crop, scale, ratio, flip, max_pixels, resize="fast"))]
    #[allow(clippy::too_many_arguments)] // one per ImageDataset argument
    fn new(
        height: u32,
        width: u32,
        crop: &str,
        scale: (f64, f64),
        ratio: (f64, f64),
        flip: f64,
        max_pixels: u64,
        resize: &str,
    ) -> PyResult<Self> {
        let crop = match crop {
            "center" => Crop::Center,
            "random_resized" => Crop::RandomResized { scale: [scale.0, scale.1], ratio: [ratio.0, ratio.1] },
            "none" => Crop::None,
            other => {
                return Err(argument(format!(
                    "crop must be 'center', 'random_resized' or 'none', got {other:?}"
                )))
            }
        };
        let resize = match resize {
            "fast" => Resize::Fast,
            "exact" => Resize::Exact,
            other => return Err(argument(format!("resize must be 'fast' or 'exact', got {other:?}"))),
        };
        let spec = Render { height, width, crop, resize, flip, limits: Limits { max_pixels } };
        spec.validate().map_err(spec_error)?;
        Ok(Images { spec })
    }

    /// Records `idxs` of `handle`, rendered for `(seed, step)`: a new `(B, H, W, 3)` uint8 array.
    fn read<'py>(
        &self,
        py: Python<'py>,
        handle: &Handle,
        idxs: U64s<'py>,
        seed: u64,
        step: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let idxs = idxs.as_slice()?.to_vec();
        let row = self.spec.output_bytes();
        let total = row
            .checked_mul(idxs.len())
            .ok_or_else(|| argument(format!("{} pictures do not fit in memory", idxs.len())))?;
        let mut out = vec![0u8; total];
        let spec = self.spec;
        handle.read(py, |r| loaderx_native::images::read_images(r, &idxs, &spec, seed, step, &mut out))?;
        let shape = [idxs.len(), self.spec.height as usize, self.spec.width as usize, 3];
        Ok(PyArray1::from_vec(py, out).reshape(shape)?.into_any())
    }

    /// `(height, width)` of every output.
    #[getter]
    fn size(&self) -> (u32, u32) {
        (self.spec.height, self.spec.width)
    }
}

fn header_tuple(h: Header) -> (&'static str, u32, u32, u8) {
    (h.media.as_str(), h.width, h.height, h.orientation)
}

/// The header of one encoded image: `(media, width, height, orientation)`, or a ValueError
/// saying why the bytes are not an image.
#[pyfunction]
pub(crate) fn image_header(bytes: &[u8]) -> PyResult<(&'static str, u32, u32, u8)> {
    image::header(bytes).map(header_tuple).map_err(|e| argument(e.to_string()))
}

/// The schema's `media` value for records of these formats (`"jpeg"`, … or `"mixed"`).
#[pyfunction]
pub(crate) fn media_value(formats: Vec<String>) -> PyResult<&'static str> {
    let parsed =
        formats.iter().map(|f| f.parse()).collect::<Result<Vec<image::Media>, _>>().map_err(spec_error)?;
    Ok(image::Media::schema_value(&parsed))
}

/// Draws given by the caller, in order (a test injects torch's): uniforms, then integers taken
/// modulo the range asked for. Running out is an error, not a default.
struct Given {
    uniforms: std::vec::IntoIter<f32>,
    integers: std::vec::IntoIter<u64>,
    short: bool,
}

impl loaderx_core::augment::Draws for Given {
    fn uniform(&mut self) -> f32 {
        self.uniforms.next().unwrap_or_else(|| {
            self.short = true;
            0.0
        })
    }

    fn below(&mut self, n: u64) -> u64 {
        match self.integers.next() {
            Some(v) => v % n.max(1),
            None => {
                self.short = true;
                0
            }
        }
    }
}

/// `RandomResizedCrop`'s parameters as the engine computes them, from given draws:
/// `(top, left, height, width)`. For checking the engine against torchvision's definition.
#[pyfunction]
pub(crate) fn random_resized_params(
    height: u32,
    width: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
    uniforms: Vec<f32>,
    integers: Vec<u64>,
) -> PyResult<(u32, u32, u32, u32)> {
    let mut given = Given { uniforms: uniforms.into_iter(), integers: integers.into_iter(), short: false };
    let r = loaderx_core::augment::random_resized(
        height,
        width,
        [scale.0, scale.1],
        [ratio.0, ratio.1],
        &mut given,
    );
    if given.short {
        return Err(argument("not enough draws given".into()));
    }
    Ok((r.top, r.left, r.height, r.width))
}
