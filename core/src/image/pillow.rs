//! Pillow's bilinear resize, to the bit: the arithmetic of `Image.resize(size, BILINEAR, box)`
//! (Pillow's `ImagingResample` for 8-bit images), for [`super::Resize::Exact`].
//!
//! The filter is separable. For each output column (then row) the taps are the input pixels
//! within `support = max(scale, 1)` of the column's centre `in0 + (x + 0.5) * scale`, weighted by
//! the triangle filter stretched by `max(scale, 1)` (antialiasing when shrinking), normalised to
//! sum 1 in `f64`, then rounded to fixed point with [`PRECISION_BITS`] fraction bits. A pass adds
//! half a unit, sums `pixel * tap` in integers and keeps the top byte, clipped to `0..=255`. The
//! horizontal pass runs first, over only the rows the vertical pass reads.
//!
//! Invariants: every tap index lies inside the input (the window is clamped to it, as Pillow
//! clamps it), so no index is out of bounds for any size or box. Sums are `i32`, as in Pillow:
//! each tap is at most `2^22`, so a product fits; the taps sum to `2^22` plus rounding, so a sum
//! fits too for any window under 8 million pixels. Wider windows (a shrink of more than 4
//! million to 1) wrap as Pillow's sums do, and never panic.
//! Pillow computes the box's extent in `f32` and the rest in `f64`: so does this module.

/// Fraction bits of the fixed-point taps (Pillow's `PRECISION_BITS` for 8-bit images: 32 - 8 - 2).
const PRECISION_BITS: u32 = 22;

/// Rows of RGB pixels: `width` × `height`, row `y` starting at byte `y * stride`.
pub(super) struct View<'a> {
    pub(super) rgb: &'a [u8],
    pub(super) stride: usize,
    pub(super) width: u32,
    pub(super) height: u32,
}

/// The taps of one pass: output `i` reads inputs `start[i] .. start[i] + len[i]` with weights
/// `k[i * ksize ..][.. len[i]]`.
struct Taps {
    start: Vec<usize>,
    len: Vec<usize>,
    ksize: usize,
    k: Vec<i32>,
}

fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

/// Pillow's `precompute_coeffs` and `normalize_coeffs_8bpc` for one axis: `out_size` outputs
/// from the span `in0 .. in1` of an axis of `in_size` pixels.
fn taps(in_size: u32, in0: f32, in1: f32, out_size: u32) -> Taps {
    let scale = f64::from(in1 - in0) / f64::from(out_size);
    let filterscale = scale.max(1.0);
    let support = filterscale; // the triangle's support is 1
    let ksize = support.ceil() as usize * 2 + 1;
    let n = out_size as usize;
    let mut t =
        Taps { start: Vec::with_capacity(n), len: Vec::with_capacity(n), ksize, k: vec![0; n * ksize] };
    let mut w = vec![0f64; ksize];
    for xx in 0..n {
        let center = f64::from(in0) + (xx as f64 + 0.5) * scale;
        // `as i64` truncates toward zero, as C's `(int)` does; then the window is clamped.
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xmax = ((center + support + 0.5) as i64).min(i64::from(in_size));
        let count = (xmax - xmin).clamp(0, ksize as i64) as usize;
        let mut ww = 0.0;
        for (x, slot) in w.iter_mut().enumerate().take(count) {
            *slot = triangle(((x as i64 + xmin) as f64 - center + 0.5) / filterscale);
            ww += *slot;
        }
        let row = &mut t.k[xx * ksize..][..count];
        for (dst, &v) in row.iter_mut().zip(&w) {
            let v = if ww != 0.0 { v / ww } else { v };
            let fixed = v * f64::from(1u32 << PRECISION_BITS);
            *dst = if v < 0.0 { (fixed - 0.5) as i32 } else { (fixed + 0.5) as i32 };
        }
        t.start.push(xmin as usize);
        t.len.push(count);
    }
    t
}

fn clip8(v: i32) -> u8 {
    if v >= (1i32 << PRECISION_BITS << 8) {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// One output pixel of the horizontal pass: `Σ tap * pixel` over the window's pixels.
fn dot(window: &[u8], k: &[i32], out: &mut [u8]) {
    let (mut r, mut g, mut b) = (HALF, HALF, HALF);
    for (p, &kv) in window.chunks_exact(3).zip(k) {
        r = r.wrapping_add(i32::from(p[0]) * kv);
        g = g.wrapping_add(i32::from(p[1]) * kv);
        b = b.wrapping_add(i32::from(p[2]) * kv);
    }
    out[0] = clip8(r);
    out[1] = clip8(g);
    out[2] = clip8(b);
}

/// Resizes the box `(x0, y0, x1, y1)` of `src` (pixels, fractional allowed, as Pillow's `box`)
/// into `out`: `out_w` × `out_h` RGB rows. The box must lie within `src` and `out` hold
/// `out_w * out_h * 3` bytes (the caller's checks).
pub(super) fn resize(src: &View<'_>, bbox: [f32; 4], out_w: u32, out_h: u32, out: &mut [u8]) {
    let horiz = taps(src.width, bbox[0], bbox[2], out_w);
    let vert = taps(src.height, bbox[1], bbox[3], out_h);
    let (ow, oh) = (out_w as usize, out_h as usize);
    // The rows the vertical pass reads.
    let first = vert.start.first().copied().unwrap_or(0);
    let last = vert.start.iter().zip(&vert.len).map(|(s, l)| s + l).max().unwrap_or(first).max(first);
    let rows = last - first;
    let line_bytes = ow * 3;
    let mut temp = vec![0u8; line_bytes * rows];
    for (y, line) in temp.chunks_exact_mut(line_bytes).enumerate() {
        let row = &src.rgb[(first + y) * src.stride..];
        for (x, px) in line.chunks_exact_mut(3).enumerate() {
            let (start, len) = (horiz.start[x], horiz.len[x]);
            dot(&row[start * 3..(start + len) * 3], &horiz.k[x * horiz.ksize..][..len], px);
        }
    }
    // The vertical pass adds whole rows, which the compiler vectorises.
    let mut acc = vec![0i32; line_bytes];
    for (y, line) in out.chunks_exact_mut(line_bytes).take(oh).enumerate() {
        acc.fill(HALF);
        let k = &vert.k[y * vert.ksize..][..vert.len[y]];
        let rows = temp[(vert.start[y] - first) * line_bytes..].chunks_exact(line_bytes);
        for (row, &kv) in rows.zip(k) {
            for (a, &p) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(i32::from(p) * kv);
            }
        }
        for (o, &a) in line.iter_mut().zip(&acc) {
            *o = clip8(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(rgb: &[u8], width: u32, height: u32) -> View<'_> {
        View { rgb, stride: width as usize * 3, width, height }
    }

    #[test]
    fn same_size_is_the_identity() {
        let rgb: Vec<u8> = (0..5 * 4 * 3).map(|v| (v * 37 % 256) as u8).collect();
        let mut out = vec![0; rgb.len()];
        resize(&view(&rgb, 5, 4), [0.0, 0.0, 5.0, 4.0], 5, 4, &mut out);
        assert_eq!(out, rgb);
    }

    #[test]
    fn halving_averages_pairs_with_the_stretched_triangle() {
        // 4 -> 2 columns: scale 2, support 2; output 0 (centre 1.0) weighs inputs 0..3 as
        // 1/4, 3/4... normalised: [0.75, 0.75, 0.25] / 1.75 over inputs 0, 1, 2.
        let row = [0u8, 100, 200, 40];
        let rgb: Vec<u8> = row.iter().flat_map(|&v| [v, v, v]).collect();
        let mut out = vec![0; 2 * 3];
        resize(&view(&rgb, 4, 1), [0.0, 0.0, 4.0, 1.0], 2, 1, &mut out);
        let want0: f64 = (0.75 * 0.0 + 0.75 * 100.0 + 0.25 * 200.0) / 1.75;
        let want1: f64 = (0.25 * 100.0 + 0.75 * 200.0 + 0.75 * 40.0) / 1.75;
        assert_eq!(out[0], want0.round() as u8);
        assert_eq!(out[3], want1.round() as u8);
    }

    #[test]
    fn constant_pictures_stay_constant_at_any_size_and_box() {
        let rgb = vec![77u8; 9 * 7 * 3];
        for (w, h) in [(1, 1), (3, 2), (9, 7), (20, 15)] {
            let mut out = vec![0; w * h * 3];
            resize(&view(&rgb, 9, 7), [0.5, 1.25, 8.0, 6.5], w as u32, h as u32, &mut out);
            assert!(out.iter().all(|&v| v == 77), "{w}x{h}");
        }
    }
}
