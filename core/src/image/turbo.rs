//! JPEG decoding with libjpeg-turbo (as built by mozjpeg-sys, with its SIMD), for native builds
//! (the `turbo` feature); wasm builds decode with zune-jpeg.
//!
//! It decodes only what a crop needs: at the smallest DCT scale (1/8, 1/4, 1/2 or 1) at which
//! the crop stays at least twice the output size (Pillow's `reducing_gap=2.0`), only the iMCU columns the crop and its
//! filter margin span (`jpeg_crop_scanline`), skipping the rows above (`jpeg_skip_scanlines`)
//! and stopping after the rows below are read.
//!
//! Invariants:
//! * libjpeg's fatal errors unwind out of the C code (mozjpeg-sys builds it with `-fexceptions`)
//!   into the `catch_unwind` of [`decode_region`], become [`ImageError::Corrupt`], and the
//!   decompressor is destroyed on every path (a drop guard).
//! * The warnings that mean the data ended or is damaged (premature end of file or segment,
//!   lost sync) are errors too, so a truncated file is never a grey-filled picture.
//! * Only greyscale and YCbCr/RGB JPEGs come here ([`takes`]); CMYK and YCCK go to zune-jpeg.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_ulong};
use std::panic::{self, AssertUnwindSafe};

use mozjpeg_sys as ffi;

use super::{corrupt, ImageError, Media, Rect};

/// `JWRN_HIT_MARKER`, `JWRN_JPEG_EOF` and `JWRN_MUST_RESYNC` in jerror.h's message list: the
/// warnings that mean the entropy-coded data is cut short or damaged.
const FATAL_WARNINGS: [c_int; 3] = [117, 120, 121];

/// What unwinds out of libjpeg: its message code.
struct Failed(c_int);

extern "C-unwind" fn error_exit(cinfo: &mut ffi::jpeg_common_struct) {
    // SAFETY: `err` points at the error manager that `Decompressor` owns, alive while cinfo is.
    let code = unsafe { (*cinfo.err).msg_code };
    panic::resume_unwind(Box::new(Failed(code)));
}

extern "C-unwind" fn emit_message(cinfo: &mut ffi::jpeg_common_struct, level: c_int) {
    // SAFETY: as in `error_exit`.
    let code = unsafe { (*cinfo.err).msg_code };
    if level < 0 && FATAL_WARNINGS.contains(&code) {
        panic::resume_unwind(Box::new(Failed(code)));
    }
}

extern "C-unwind" fn output_message(_: &mut ffi::jpeg_common_struct) {}

/// A decompressor and its error manager, destroyed on drop (also while unwinding).
struct Decompressor {
    cinfo: ffi::jpeg_decompress_struct,
    err: ffi::jpeg_error_mgr,
}

impl Decompressor {
    fn new() -> Box<Decompressor> {
        // SAFETY: both are plain C structs for which all-zero bytes are a valid (empty) value;
        // jpeg_std_error and jpeg_create_decompress initialise them before any other use.
        let mut d: Box<Decompressor> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `d` is boxed, so `err` does not move while `cinfo.err` points at it.
        unsafe {
            ffi::jpeg_std_error(&mut d.err);
            d.err.error_exit = Some(error_exit);
            d.err.emit_message = Some(emit_message);
            d.err.output_message = Some(output_message);
            d.cinfo.common.err = &mut d.err;
            ffi::jpeg_create_decompress(&mut d.cinfo);
        }
        d
    }
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: created in `new`; destroying frees libjpeg's memory whatever state it is in.
        unsafe { ffi::jpeg_destroy_decompress(&mut self.cinfo) }
    }
}

/// True for the JPEGs this decoder takes: greyscale and YCbCr/RGB (not CMYK or YCCK).
pub(super) fn takes(components: usize) -> bool {
    components == 1 || components == 3
}

/// Part of a decoded JPEG: `width` × `height` RGB pixels whose top-left is pixel `(x, y)` of the
/// picture decoded at `scale` (output pixels per stored pixel: 1, 1/2, 1/4 or 1/8).
#[derive(Debug)]
pub(super) struct Region {
    pub(super) x: u32,
    pub(super) y: u32,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) scale: f64,
    pub(super) rgb: Vec<u8>,
}

/// What of the stored picture is wanted: the crop `rect` (stored pixels), to be shown at
/// `out_w` × `out_h`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Want {
    pub(super) rect: Rect,
    pub(super) out_w: u32,
    pub(super) out_h: u32,
    /// Whether a reduced DCT scale may be used (else the region is decoded at full scale).
    pub(super) reduce: bool,
}

/// How much larger than the output the box stays after DCT scaling, at least: the resize that
/// follows then still shrinks it twice or more, and its antialiasing hides the DCT scaling's
/// coarser filter (Pillow's `reducing_gap=2.0` rule).
const REDUCING_GAP: u64 = 2;

/// The smallest DCT scale numerator (of 8: 1, 2, 4 or 8) at which a `w` × `h` box still has at
/// least [`REDUCING_GAP`] times `out_w` × `out_h` pixels.
fn numerator(w: u32, h: u32, out_w: u32, out_h: u32) -> u32 {
    let fits = |n: u64| {
        u64::from(w) * n >= u64::from(out_w) * 8 * REDUCING_GAP
            && u64::from(h) * n >= u64::from(out_h) * 8 * REDUCING_GAP
    };
    [1, 2, 4].into_iter().find(|&n| fits(n)).map_or(8, |n| n as u32)
}

/// Decodes the part of `bytes` that `want` needs (the whole picture when `want` is `None`),
/// with a margin around the box wide enough for the resize filter, at the smallest scale that
/// keeps the box at least the output size.
pub(super) fn decode_region(bytes: &[u8], want: Option<Want>) -> Result<Region, ImageError> {
    let run = panic::catch_unwind(AssertUnwindSafe(|| decode_unwinding(bytes, want)));
    match run {
        Ok(region) => region,
        Err(payload) => match payload.downcast::<Failed>() {
            Ok(failed) => Err(corrupt(
                Media::Jpeg,
                format!("libjpeg-turbo message {}: {}", failed.0, message(failed.0)),
            )),
            // Not libjpeg's: a real panic, which must not be hidden.
            Err(other) => panic::resume_unwind(other),
        },
    }
}

/// A short text for the codes users meet.
fn message(code: c_int) -> &'static str {
    match code {
        117 => "corrupt JPEG data: premature end of data segment",
        120 => "premature end of JPEG file (truncated)",
        121 => "corrupt JPEG data: lost synchronisation",
        _ => "invalid or unsupported JPEG data",
    }
}

fn decode_unwinding(bytes: &[u8], want: Option<Want>) -> Result<Region, ImageError> {
    let mut d = Decompressor::new();
    let c = &mut d.cinfo;
    // SAFETY: `bytes` outlives `d` (dropped at the end of this function); libjpeg only reads it.
    unsafe { ffi::jpeg_mem_src(c, bytes.as_ptr(), bytes.len() as c_ulong) };
    // SAFETY: a created decompressor with a source; errors unwind (see the module docs).
    unsafe { ffi::jpeg_read_header(c, 1) };
    if !takes(c.num_components as usize) {
        return Err(corrupt(Media::Jpeg, "CMYK or YCCK (decoded elsewhere)"));
    }
    c.out_color_space = ffi::J_COLOR_SPACE::JCS_RGB;
    let n = want.filter(|w| w.reduce).map_or(8, |w| numerator(w.rect.width, w.rect.height, w.out_w, w.out_h));
    c.scale_num = n;
    c.scale_denom = 8;
    // SAFETY: after jpeg_read_header, as the API requires.
    unsafe { ffi::jpeg_start_decompress(c) };
    let (full_w, full_h) = (c.output_width, c.output_height);
    let scale = f64::from(n) / 8.0;
    // The rows and columns to decode, in scaled pixels: the box, plus the filter's reach (the
    // box's size over the output's, at least 1) and 2 for rounding, clamped to the picture.
    let (x0, x1, y0, y1) = match want {
        None => (0, full_w, 0, full_h),
        Some(w) => {
            let (l, t) = (f64::from(w.rect.left) * scale, f64::from(w.rect.top) * scale);
            let (bw, bh) = (f64::from(w.rect.width) * scale, f64::from(w.rect.height) * scale);
            let mx = (bw / f64::from(w.out_w)).max(1.0).ceil() + 2.0;
            let my = (bh / f64::from(w.out_h)).max(1.0).ceil() + 2.0;
            let clamp = |v: f64, hi: u32| v.clamp(0.0, f64::from(hi)) as u32;
            (
                clamp((l - mx).floor(), full_w),
                clamp((l + bw + mx).ceil(), full_w),
                clamp((t - my).floor(), full_h),
                clamp((t + bh + my).ceil(), full_h),
            )
        }
    };
    let (mut xoff, mut width) = (x0, x1.saturating_sub(x0).max(1));
    if (xoff, width) != (0, full_w) {
        // SAFETY: after jpeg_start_decompress and before any scanline is read. libjpeg widens
        // the span to whole iMCU columns and says where it starts.
        unsafe { ffi::jpeg_crop_scanline(c, &mut xoff, &mut width) };
    }
    let row = c.output_width as usize * 3;
    if y0 > 0 {
        // SAFETY: skipping within the picture (y0 < output_height).
        unsafe { ffi::jpeg_skip_scanlines(c, y0) };
    }
    let rows = y1.saturating_sub(y0).max(1).min(full_h - y0) as usize;
    let mut rgb = vec![0u8; rows * row];
    let mut done = 0;
    while done < rows {
        let mut at = rgb[done * row..].as_mut_ptr();
        // SAFETY: `at` points at a row of `row` bytes inside `rgb`; one line is read into it.
        let got = unsafe { ffi::jpeg_read_scanlines(c, &mut at, 1) };
        if got != 1 {
            return Err(corrupt(Media::Jpeg, "the data ended before the last row"));
        }
        done += 1;
    }
    // Rows below are not needed: the decompressor is dropped unfinished (destroy aborts it).
    Ok(Region { x: xoff, y: y0, width: c.output_width, height: rows as u32, scale, rgb })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_numerators_keep_the_box_at_least_the_output() {
        assert_eq!(numerator(400, 300, 224, 224), 8);
        assert_eq!(numerator(896, 896, 224, 224), 4);
        assert_eq!(numerator(895, 2000, 224, 224), 8);
        assert_eq!(numerator(1792, 1792, 224, 224), 2);
        assert_eq!(numerator(3584, 4000, 224, 224), 1);
        assert_eq!(numerator(u32::MAX, u32::MAX, 1, 1), 1);
    }
}
