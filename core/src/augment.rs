//! Image augmentation parameters: the part of an image a sample keeps and whether it is
//! mirrored, as a pure function of `(seed, step, record)`, so a batch is the same for any worker
//! count and a resumed run repeats it exactly.
//!
//! [`random_resized`] is torchvision's `RandomResizedCrop.get_params` step for step (v1 and v2
//! share it): up to ten tries of an area share drawn from `scale` and an aspect ratio drawn
//! log-uniformly from `ratio`, the first crop that fits placed uniformly, else the centred crop of
//! the whole image clamped to `ratio`. Its draws are float32 (as torch's `uniform_` makes them)
//! and its roundings half to even (as Python's `round`), so with the same draws it returns the
//! same rectangle.
//!
//! Invariants:
//! * Every [`Rect`] lies inside its image, and is non-empty when the image is.
//! * [`Keyed`] draws depend only on the seed, the step and the record; nothing else is read.
//! * No input panics: empty images, empty or reversed ranges and NaN bounds give a valid rect.

use crate::sampler::hash2;

/// A crop of an image: rows `top..top + height`, columns `left..left + width`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub top: u32,
    pub left: u32,
    pub height: u32,
    pub width: u32,
}

impl Rect {
    /// The whole of a `height` × `width` image.
    pub fn whole(height: u32, width: u32) -> Rect {
        Rect { top: 0, left: 0, height, width }
    }
}

/// The random numbers an augmentation takes.
pub trait Draws {
    /// A float32 uniform in `[0, 1)`.
    fn uniform(&mut self) -> f32;
    /// A uniform integer in `[0, n)` (`n >= 1`).
    fn below(&mut self, n: u64) -> u64;
}

/// Draws keyed by `(seed, step, record)`: the k-th draw is a hash of the key and k.
#[derive(Debug, Clone)]
pub struct Keyed {
    key: u64,
    counter: u64,
}

impl Keyed {
    /// The draws of record `record` at step `step`.
    pub fn new(seed: u64, step: u64, record: u64) -> Keyed {
        Keyed { key: hash2(hash2(seed ^ DOMAIN_AUGMENT, step), record), counter: 0 }
    }

    fn next(&mut self) -> u64 {
        self.counter += 1;
        hash2(self.key, self.counter)
    }
}

/// Separates augmentation keys from the sampler's.
const DOMAIN_AUGMENT: u64 = 0x0041_5547_4D45_4E54;

impl Draws for Keyed {
    fn uniform(&mut self) -> f32 {
        // 24 random bits: every float32 of the form k / 2^24.
        (self.next() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    fn below(&mut self, n: u64) -> u64 {
        // Multiply-high: the bias is below 2^-40 for any n this takes (image sides).
        ((u128::from(self.next()) * u128::from(n.max(1))) >> 64) as u64
    }
}

/// torch's `uniform_(a, b)` on a float32 tensor: `(b - a) * u + a` in float32.
fn uniform_between(draws: &mut impl Draws, a: f32, b: f32) -> f32 {
    (b - a) * draws.uniform() + a
}

/// Python's `int(round(x))` for the non-negative values here (half to even), saturating.
fn round_even(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x.round_ties_even().min(u64::MAX as f64) as u64
    }
}

/// torchvision's `RandomResizedCrop.get_params` for a `height` × `width` image with area share
/// `scale` (default `[0.08, 1.0]`) and aspect ratio `ratio` (default `[3/4, 4/3]`).
pub fn random_resized(
    height: u32,
    width: u32,
    scale: [f64; 2],
    ratio: [f64; 2],
    draws: &mut impl Draws,
) -> Rect {
    if height == 0 || width == 0 {
        return Rect::whole(height, width);
    }
    let area = f64::from(height) * f64::from(width);
    let (s0, s1) = (scale[0] as f32, scale[1] as f32);
    let (l0, l1) = ((ratio[0] as f32).ln(), (ratio[1] as f32).ln());
    for _ in 0..10 {
        let target = area * f64::from(uniform_between(draws, s0, s1));
        let aspect = f64::from(uniform_between(draws, l0, l1).exp());
        let w = round_even((target * aspect).sqrt());
        let h = round_even((target / aspect).sqrt());
        if 0 < w && w <= u64::from(width) && 0 < h && h <= u64::from(height) {
            let top = draws.below(u64::from(height) - h + 1);
            let left = draws.below(u64::from(width) - w + 1);
            return Rect { top: top as u32, left: left as u32, height: h as u32, width: w as u32 };
        }
    }
    // The fallback: the whole image, clamped to the ratio range, centred.
    let (lo, hi) = (ratio[0].min(ratio[1]), ratio[0].max(ratio[1]));
    let in_ratio = f64::from(width) / f64::from(height);
    let (h, w) = if in_ratio < lo {
        (round_even(f64::from(width) / lo).clamp(1, u64::from(height)), u64::from(width))
    } else if in_ratio > hi {
        (u64::from(height), round_even(f64::from(height) * hi).clamp(1, u64::from(width)))
    } else {
        (u64::from(height), u64::from(width))
    };
    let top = (u64::from(height) - h) / 2;
    let left = (u64::from(width) - w) / 2;
    Rect { top: top as u32, left: left as u32, height: h as u32, width: w as u32 }
}

/// The largest centred crop of a `height` × `width` image with the aspect ratio of an
/// `out_h` × `out_w` output (the whole image when the ratios match).
pub fn center(height: u32, width: u32, out_h: u32, out_w: u32) -> Rect {
    if height == 0 || width == 0 || out_h == 0 || out_w == 0 {
        return Rect::whole(height, width);
    }
    // Compare width·out_h with height·out_w in integers: no rounding decides the branch.
    let (wide, tall) = (u64::from(width) * u64::from(out_h), u64::from(height) * u64::from(out_w));
    let (h, w) = if wide > tall {
        // Too wide: keep the height, cut the width to height · out_w / out_h.
        (u64::from(height), (tall / u64::from(out_h)).max(1))
    } else {
        ((wide / u64::from(out_w)).max(1), u64::from(width))
    };
    Rect {
        top: ((u64::from(height) - h) / 2) as u32,
        left: ((u64::from(width) - w) / 2) as u32,
        height: h as u32,
        width: w as u32,
    }
}

/// torchvision's `RandomHorizontalFlip(p)`: mirrored when a uniform draw is below `p`.
pub fn flip(p: f64, draws: &mut impl Draws) -> bool {
    f64::from(draws.uniform()) < p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Draws from a list, as a test injects them.
    struct Given(Vec<f32>, Vec<u64>);

    impl Draws for Given {
        fn uniform(&mut self) -> f32 {
            if self.0.is_empty() {
                0.5
            } else {
                self.0.remove(0)
            }
        }
        fn below(&mut self, n: u64) -> u64 {
            if self.1.is_empty() {
                0
            } else {
                self.1.remove(0) % n
            }
        }
    }

    /// Keyed draws, counting the placements (`below`) a crop took.
    struct Counted(Keyed, u32);

    impl Draws for Counted {
        fn uniform(&mut self) -> f32 {
            self.0.uniform()
        }
        fn below(&mut self, n: u64) -> u64 {
            self.1 += 1;
            self.0.below(n)
        }
    }

    fn inside(r: Rect, h: u32, w: u32) -> bool {
        r.height > 0 && r.width > 0 && r.top + r.height <= h && r.left + r.width <= w
    }

    proptest! {
        #[test]
        fn random_crops_lie_inside_and_keep_their_share_and_ratio(h in 1u32..3000, w in 1u32..3000, seed: u64, step in 0u64..1000, rec in 0u64..1000) {
            let mut d = Counted(Keyed::new(seed, step, rec), 0);
            let r = random_resized(h, w, [0.08, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut d);
            prop_assert!(inside(r, h, w), "{r:?} in {h}x{w}");
            if d.1 == 0 {
                // Ten misses, nothing placed: the fallback, centred.
                prop_assert_eq!((r.top, r.left), ((h - r.height) / 2, (w - r.width) / 2));
                return Ok(());
            }
            if h >= 64 && w >= 64 {
                let share = f64::from(r.height) * f64::from(r.width) / (f64::from(h) * f64::from(w));
                prop_assert!(share > 0.07 && share < 1.03, "share {share}");
                let aspect = f64::from(r.width) / f64::from(r.height);
                prop_assert!(aspect > 0.7 && aspect < 1.43, "aspect {aspect}");
            }
        }

        #[test]
        fn the_same_key_draws_the_same_crop(h in 1u32..2000, w in 1u32..2000, seed: u64, step: u64, rec: u64) {
            let a = random_resized(h, w, [0.08, 1.0], [0.75, 4.0 / 3.0], &mut Keyed::new(seed, step, rec));
            let b = random_resized(h, w, [0.08, 1.0], [0.75, 4.0 / 3.0], &mut Keyed::new(seed, step, rec));
            prop_assert_eq!(a, b);
        }

        #[test]
        fn center_crops_are_centred_with_the_output_ratio(h in 1u32..5000, w in 1u32..5000, oh in 1u32..600, ow in 1u32..600) {
            let r = center(h, w, oh, ow);
            prop_assert!(inside(r, h, w));
            prop_assert!(r.height == h || r.width == w);
            prop_assert_eq!(r.top, (h - r.height) / 2);
            prop_assert_eq!(r.left, (w - r.width) / 2);
            // Within one pixel of the exact ratio.
            let exact_w = f64::from(r.height) * f64::from(ow) / f64::from(oh);
            prop_assert!(r.width == w || (f64::from(r.width) - exact_w).abs() <= 1.0);
        }
    }

    #[test]
    fn injected_draws_give_torchvisions_rect() {
        // 500x375 (H x W): scale 0.5, log-ratio at its middle (aspect 1): target 93750,
        // w = h = round(sqrt(93750)) = 306, then i = 7, j = 30.
        let mut d = Given(vec![(0.5 - 0.08) / 0.92, 0.5], vec![7, 30]);
        let r = random_resized(500, 375, [0.08, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut d);
        assert_eq!(r, Rect { top: 7, left: 30, height: 306, width: 306 });
    }

    #[test]
    fn ten_misses_fall_back_to_the_clamped_centre() {
        // A 10x1000 strip: no crop of ratio <= 4/3 with share >= 0.08 fits in 10 rows.
        let r = random_resized(10, 1000, [0.08, 1.0], [3.0 / 4.0, 4.0 / 3.0], &mut Keyed::new(1, 2, 3));
        assert_eq!(r, Rect { top: 0, left: (1000 - 13) / 2, height: 10, width: 13 });
        let r = random_resized(0, 7, [0.08, 1.0], [0.75, 1.33], &mut Keyed::new(1, 2, 3));
        assert_eq!(r, Rect::whole(0, 7));
    }

    #[test]
    fn flips_take_half_of_the_draws() {
        let n = (0..10_000).filter(|&k| flip(0.5, &mut Keyed::new(9, k, 1))).count();
        assert!((4_700..5_300).contains(&n), "{n}");
    }
}
