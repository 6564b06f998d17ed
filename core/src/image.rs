//! Encoded images (JPEG, PNG, WebP) held as ragged `uint8` records: what a record is, its size,
//! and its pixels after a crop, a resize and a mirror, all from the bytes alone.
//!
//! The decoders are pure Rust (zune-jpeg, zune-png, image-webp) and the resize is
//! fast_image_resize's separable convolution, so the same code runs natively and in wasm; native
//! builds (the `turbo` feature) decode greyscale and YCbCr JPEGs with libjpeg-turbo instead,
//! which is faster, matches Pillow's pixels and decodes only the part a crop needs, at a
//! reduced DCT scale where the crop allows (`turbo`).
//!
//! Invariants:
//! * Nothing here panics on any input bytes: an undecodable record is an [`ImageError`], never a
//!   wrong picture. A truncated JPEG is an error (the decoder runs in strict mode), not a grey
//!   bottom half.
//! * No image of more than [`Limits::max_pixels`] pixels is decoded: the header is read first
//!   and a larger image is [`ImageError::TooLarge`] before any pixel buffer exists (the defence
//!   against decompression bombs).
//! * Pictures are 8-bit RGB in display orientation: grey is replicated, alpha dropped (as
//!   Pillow's `convert("RGB")` does), CMYK/YCCK converted by the JPEG decoder, 16-bit samples
//!   cut to their high byte, and the EXIF orientation applied.
//! * [`render`] is a pure function of the bytes, the [`Render`] spec and `(seed, step,
//!   record)`: the crop and the mirror come from [`crate::augment`]'s keyed draws. It does not
//!   depend on the thread count; native and wasm builds differ only in JPEG decoding (libjpeg-turbo
//!   natively, zune-jpeg in wasm), by rounding.

use std::io::Cursor;

use fast_image_resize::images::{CroppedImage, Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use thiserror::Error;
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;

use crate::augment::{self, Keyed, Rect};

mod pillow;
#[cfg(feature = "turbo")]
mod turbo;

/// An encoded image format, told by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Media {
    Jpeg,
    Png,
    Webp,
}

impl Media {
    /// Every format, in the order the schema's `media` names them.
    pub const ALL: [Media; 3] = [Media::Jpeg, Media::Png, Media::Webp];

    /// The schema spelling, also the file extension.
    pub fn as_str(self) -> &'static str {
        match self {
            Media::Jpeg => "jpeg",
            Media::Png => "png",
            Media::Webp => "webp",
        }
    }

    /// The format these bytes start like, if any.
    pub fn sniff(bytes: &[u8]) -> Option<Media> {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Media::Jpeg)
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Media::Png)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(Media::Webp)
        } else {
            None
        }
    }

    /// The schema's `media` value for a store holding these formats: the one format, or
    /// `"mixed"`.
    pub fn schema_value(seen: &[Media]) -> &'static str {
        match seen {
            [one] => one.as_str(),
            [first, rest @ ..] if rest.iter().all(|m| m == first) => first.as_str(),
            _ => "mixed",
        }
    }
}

impl std::str::FromStr for Media {
    type Err = ImageError;

    fn from_str(s: &str) -> Result<Media, ImageError> {
        match s {
            "jpeg" | "jpg" => Ok(Media::Jpeg),
            "png" => Ok(Media::Png),
            "webp" => Ok(Media::Webp),
            other => Err(ImageError::Spec(format!("unknown image format {other:?} (jpeg, png or webp)"))),
        }
    }
}

/// Why a record is not a picture, or a spec is not usable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ImageError {
    /// The record holds no bytes.
    #[error("the record is empty (0 bytes), not an image")]
    Empty,
    /// The bytes are none of the formats read here.
    #[error("not a JPEG, PNG or WebP image (the record starts with {0})")]
    NotAnImage(String),
    /// The header names more pixels than the limit allows.
    #[error("{width}x{height} is {pixels} pixels, more than the limit of {limit} (raise max_pixels if the image is genuine)", pixels = u64::from(*width) * u64::from(*height))]
    TooLarge { width: u32, height: u32, limit: u64 },
    /// The decoder refused the bytes: damaged or truncated data, or a feature it lacks.
    #[error("undecodable {media}: {why}", media = media.as_str())]
    Corrupt { media: Media, why: String },
    /// With no crop, the image must already have the output size.
    #[error(
        "the image is {width}x{height} (width x height), but crop='none' needs exactly {want_w}x{want_h}"
    )]
    WrongSize { width: u32, height: u32, want_w: u32, want_h: u32 },
    /// A [`Render`] or output buffer that cannot be used.
    #[error("{0}")]
    Spec(String),
}

impl crate::error::Classify for ImageError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            ImageError::TooLarge { .. } => ErrorKind::TooLarge,
            ImageError::WrongSize { .. } | ImageError::Spec(_) => ErrorKind::Argument,
            ImageError::Empty | ImageError::NotAnImage(_) | ImageError::Corrupt { .. } => ErrorKind::Corrupt,
        }
    }
}

/// How large an image may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most pixels (width × height) an image may have.
    pub max_pixels: u64,
}

/// Pillow's limit for `DecompressionBombError`: twice its warning threshold of 89,478,485.
pub const DEFAULT_MAX_PIXELS: u64 = 2 * 89_478_485;

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_pixels: DEFAULT_MAX_PIXELS }
    }
}

impl Limits {
    fn check(&self, width: u32, height: u32) -> Result<(), ImageError> {
        if u64::from(width) * u64::from(height) > self.max_pixels {
            Err(ImageError::TooLarge { width, height, limit: self.max_pixels })
        } else {
            Ok(())
        }
    }
}

/// What a record's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub media: Media,
    /// Width and height in display orientation (after the EXIF orientation).
    pub width: u32,
    pub height: u32,
    /// The EXIF orientation, 1 (as stored) to 8.
    pub orientation: u8,
}

/// A decoded picture: `height` rows of `width` RGB pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

fn corrupt(media: Media, why: impl std::fmt::Display) -> ImageError {
    ImageError::Corrupt { media, why: why.to_string() }
}

fn media_of(bytes: &[u8]) -> Result<Media, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    Media::sniff(bytes).ok_or_else(|| {
        let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        ImageError::NotAnImage(format!("bytes {}", head.join(" ")))
    })
}

/// JPEG's largest side.
const MAX_SIDE: usize = 65_535;

fn jpeg_options() -> DecoderOptions {
    DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_strict_mode(true)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE)
}

fn png_options() -> DecoderOptions {
    DecoderOptions::default().png_set_strip_to_8bit(true).set_max_width(1 << 24).set_max_height(1 << 24)
}

fn side(v: usize, media: Media) -> Result<u32, ImageError> {
    u32::try_from(v).map_err(|_| corrupt(media, format!("a side of {v} pixels")))
}

/// The EXIF orientation in raw EXIF (TIFF) bytes; 1 when absent or unreadable.
fn orientation(exif_tiff: Option<&[u8]>) -> u8 {
    let Some(raw) = exif_tiff else { return 1 };
    let Ok(parsed) = exif::Reader::new().read_raw(raw.to_vec()) else { return 1 };
    match parsed.get_field(exif::Tag::Orientation, exif::In::PRIMARY).and_then(|f| f.value.get_uint(0)) {
        Some(o @ 1..=8) => o as u8,
        _ => 1,
    }
}

/// Stored dimensions to display ones: orientations 5 to 8 swap the sides.
fn displayed(width: u32, height: u32, orientation: u8) -> (u32, u32) {
    if orientation >= 5 {
        (height, width)
    } else {
        (width, height)
    }
}

/// Reads the header only: format, display size and orientation. Cheap; no pixels are decoded.
pub fn header(bytes: &[u8]) -> Result<Header, ImageError> {
    probe(bytes).map(|(h, _)| h)
}

/// [`header`], and the number of colour components of a JPEG (0 for other formats).
fn probe(bytes: &[u8]) -> Result<(Header, usize), ImageError> {
    let media = media_of(bytes)?;
    let mut components = 0;
    let (width, height, orientation) = match media {
        Media::Jpeg => {
            let mut d = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), jpeg_options());
            d.decode_headers().map_err(|e| corrupt(media, e))?;
            let (w, h) = d.dimensions().ok_or_else(|| corrupt(media, "no frame header"))?;
            components = d.info().map_or(0, |i| usize::from(i.components));
            (side(w, media)?, side(h, media)?, orientation(d.exif().map(Vec::as_slice)))
        }
        Media::Png => {
            let mut d = zune_png::PngDecoder::new_with_options(ZCursor::new(bytes), png_options());
            d.decode_headers().map_err(|e| corrupt(media, e))?;
            let (w, h) = d.dimensions().ok_or_else(|| corrupt(media, "no IHDR"))?;
            let o = orientation(d.info().and_then(|i| i.exif.as_deref()));
            (side(w, media)?, side(h, media)?, o)
        }
        Media::Webp => {
            let mut d = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(|e| corrupt(media, e))?;
            let (w, h) = d.dimensions();
            let exif = d.exif_metadata().ok().flatten();
            (w, h, orientation(exif.as_deref()))
        }
    };
    let (width, height) = displayed(width, height, orientation);
    Ok((Header { media, width, height, orientation }, components))
}

/// True when libjpeg-turbo decodes this JPEG (native builds; not CMYK or YCCK).
#[cfg(feature = "turbo")]
fn by_turbo(h: &Header, components: usize) -> bool {
    h.media == Media::Jpeg && turbo::takes(components)
}

/// Decodes a record into an RGB picture in display orientation, refusing images over `limits`.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Picture, ImageError> {
    let media = media_of(bytes)?;
    let (width, height, rgb, orientation) = match media {
        Media::Jpeg => decode_jpeg(bytes, limits)?,
        Media::Png => decode_png(bytes, limits)?,
        Media::Webp => decode_webp(bytes, limits)?,
    };
    Ok(orient(Picture { width, height, rgb }, orientation))
}

type Decoded = (u32, u32, Vec<u8>, u8);

fn decode_jpeg(bytes: &[u8], limits: &Limits) -> Result<Decoded, ImageError> {
    #[cfg(feature = "turbo")]
    {
        let (h, components) = probe(bytes)?;
        if by_turbo(&h, components) {
            let (w, ht) = displayed(h.width, h.height, h.orientation); // stored size
            limits.check(w, ht)?;
            let r = turbo::decode_region(bytes, None)?;
            return Ok((r.width, r.height, r.rgb, h.orientation));
        }
    }
    let media = Media::Jpeg;
    let mut d = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), jpeg_options());
    d.decode_headers().map_err(|e| corrupt(media, e))?;
    let (w, h) = d.dimensions().ok_or_else(|| corrupt(media, "no frame header"))?;
    let (w, h) = (side(w, media)?, side(h, media)?);
    limits.check(w, h)?;
    let o = orientation(d.exif().map(Vec::as_slice));
    let rgb = d.decode().map_err(|e| corrupt(media, e))?;
    if rgb.len() != w as usize * h as usize * 3 {
        return Err(corrupt(media, format!("the decoder gave {} bytes for {w}x{h} RGB", rgb.len())));
    }
    Ok((w, h, rgb, o))
}

fn decode_png(bytes: &[u8], limits: &Limits) -> Result<Decoded, ImageError> {
    let media = Media::Png;
    let mut d = zune_png::PngDecoder::new_with_options(ZCursor::new(bytes), png_options());
    d.decode_headers().map_err(|e| corrupt(media, e))?;
    let (w, h) = d.dimensions().ok_or_else(|| corrupt(media, "no IHDR"))?;
    let (w, h) = (side(w, media)?, side(h, media)?);
    limits.check(w, h)?;
    let o = orientation(d.info().and_then(|i| i.exif.as_deref()));
    let colorspace = d.colorspace().ok_or_else(|| corrupt(media, "no colour type"))?;
    let raw = d.decode_raw().map_err(|e| corrupt(media, e))?;
    let rgb = to_rgb(raw, colorspace.num_components(), w, h, media)?;
    Ok((w, h, rgb, o))
}

fn decode_webp(bytes: &[u8], limits: &Limits) -> Result<Decoded, ImageError> {
    let media = Media::Webp;
    let mut d = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(|e| corrupt(media, e))?;
    let (w, h) = d.dimensions();
    limits.check(w, h)?;
    let o = orientation(d.exif_metadata().ok().flatten().as_deref());
    let size = d.output_buffer_size().ok_or_else(|| corrupt(media, "the image does not fit in memory"))?;
    let mut raw = vec![0u8; size];
    d.read_image(&mut raw).map_err(|e| corrupt(media, e))?;
    let channels = if d.has_alpha() { 4 } else { 3 };
    let rgb = to_rgb(raw, channels, w, h, media)?;
    Ok((w, h, rgb, o))
}

/// 1 (grey), 2 (grey and alpha), 3 (RGB) or 4 (RGBA) channels to RGB: grey replicated, alpha
/// dropped.
fn to_rgb(raw: Vec<u8>, channels: usize, w: u32, h: u32, media: Media) -> Result<Vec<u8>, ImageError> {
    let pixels = w as usize * h as usize;
    if raw.len() != pixels * channels {
        return Err(corrupt(
            media,
            format!("the decoder gave {} bytes for {w}x{h} with {channels} channels", raw.len()),
        ));
    }
    Ok(match channels {
        3 => raw,
        1 => raw.iter().flat_map(|&g| [g, g, g]).collect(),
        2 => raw.chunks_exact(2).flat_map(|p| [p[0], p[0], p[0]]).collect(),
        4 => raw.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        n => return Err(corrupt(media, format!("{n} channels"))),
    })
}

/// Applies an EXIF orientation (2 to 8) to a stored picture; 1 and unknown values leave it.
fn orient(p: Picture, orientation: u8) -> Picture {
    if !(2..=8).contains(&orientation) {
        return p;
    }
    let (w, h) = (p.width as usize, p.height as usize);
    let (out_w, out_h) = displayed(p.width, p.height, orientation);
    let mut rgb = vec![0u8; p.rgb.len()];
    for y in 0..h {
        for x in 0..w {
            // Where stored pixel (x, y) lands in the displayed picture (EXIF 2.3, tag 0x0112).
            let (dx, dy) = match orientation {
                2 => (w - 1 - x, y),
                3 => (w - 1 - x, h - 1 - y),
                4 => (x, h - 1 - y),
                5 => (y, x),
                6 => (h - 1 - y, x),
                7 => (h - 1 - y, w - 1 - x),
                _ => (y, w - 1 - x),
            };
            let from = (y * w + x) * 3;
            let to = (dy * out_w as usize + dx) * 3;
            rgb[to..to + 3].copy_from_slice(&p.rgb[from..from + 3]);
        }
    }
    Picture { width: out_w, height: out_h, rgb }
}

/// Which part of a picture becomes the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crop {
    /// The largest centred part with the output's aspect ratio ([`augment::center`]).
    Center,
    /// torchvision's `RandomResizedCrop(size, scale, ratio)` ([`augment::random_resized`]).
    RandomResized { scale: [f64; 2], ratio: [f64; 2] },
    /// The whole picture, which must already have the output size.
    None,
}

impl Crop {
    /// torchvision's defaults: `scale=(0.08, 1.0)`, `ratio=(3/4, 4/3)`.
    pub const RANDOM_RESIZED: Crop =
        Crop::RandomResized { scale: [0.08, 1.0], ratio: [3.0 / 4.0, 4.0 / 3.0] };
}

/// How a crop is resized to the output: both are bilinear with antialiasing (the triangle filter
/// stretched by the shrink factor), and they differ only in fixed-point rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resize {
    /// fast_image_resize's SIMD convolution (16-bit taps, as Pillow-SIMD): within 2 of Pillow,
    /// by 1 on about a quarter of the values. With `turbo`, JPEGs decode at a reduced DCT scale
    /// where the crop allows.
    #[default]
    Fast,
    /// Pillow's arithmetic (`crop(box).resize(size, BILINEAR)`) bit for bit, at full decode
    /// scale: lossless images give Pillow's pixels exactly. About 2x slower to resize.
    Exact,
}

/// What [`render`] makes of each record: a `height` × `width` RGB output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Render {
    pub height: u32,
    pub width: u32,
    pub crop: Crop,
    pub resize: Resize,
    /// The probability of a horizontal mirror (torchvision's `RandomHorizontalFlip(p)`); 0 never.
    pub flip: f64,
    pub limits: Limits,
}

impl Render {
    /// Checks the spec once, so that [`render`] only fails on records.
    pub fn validate(&self) -> Result<(), ImageError> {
        if self.height == 0 || self.width == 0 {
            return Err(ImageError::Spec(format!(
                "size must be positive, got {}x{}",
                self.height, self.width
            )));
        }
        if !(0.0..=1.0).contains(&self.flip) {
            return Err(ImageError::Spec(format!("flip must be a probability in [0, 1], got {}", self.flip)));
        }
        if let Crop::RandomResized { scale, ratio } = self.crop {
            let ok = |r: [f64; 2]| r.iter().all(|v| v.is_finite() && *v > 0.0) && r[0] <= r[1];
            if !ok(scale) || scale[1] > 1.0 {
                return Err(ImageError::Spec(format!("scale must be 0 < lo <= hi <= 1, got {scale:?}")));
            }
            if !ok(ratio) {
                return Err(ImageError::Spec(format!("ratio must be 0 < lo <= hi, got {ratio:?}")));
            }
        }
        Ok(())
    }

    /// Bytes of one output: `height * width * 3`.
    pub fn output_bytes(&self) -> usize {
        self.height as usize * self.width as usize * 3
    }

    /// The crop and mirror of a `height` × `width` picture, for record `record` at `step`.
    pub fn plan(&self, height: u32, width: u32, seed: u64, step: u64, record: u64) -> (Rect, bool) {
        let mut draws = Keyed::new(seed, step, record);
        let rect = match self.crop {
            Crop::Center => augment::center(height, width, self.height, self.width),
            Crop::RandomResized { scale, ratio } => {
                augment::random_resized(height, width, scale, ratio, &mut draws)
            }
            Crop::None => Rect::whole(height, width),
        };
        let mirror = self.flip > 0.0 && augment::flip(self.flip, &mut draws);
        (rect, mirror)
    }
}

/// Decodes `bytes`, crops, resizes the crop (bilinear with antialiasing, as Pillow and
/// torchvision v2 do; the filter sees only the crop, as in torchvision's `resized_crop`) and
/// mirrors as `spec` and `(seed, step, record)` say, into `out` (`spec.output_bytes()` bytes,
/// rows of RGB). With the `turbo` feature a JPEG is decoded in part (see `turbo`); where it is
/// decoded at a reduced DCT scale, the crop's position is kept in fractional pixels.
pub fn render(bytes: &[u8], spec: &Render, key: (u64, u64, u64), out: &mut [u8]) -> Result<(), ImageError> {
    if out.len() != spec.output_bytes() {
        return Err(ImageError::Spec(format!(
            "the output holds {} bytes, not {}",
            out.len(),
            spec.output_bytes()
        )));
    }
    #[cfg(feature = "turbo")]
    {
        let (h, components) = probe(bytes)?;
        if by_turbo(&h, components) && h.orientation == 1 && spec.crop != Crop::None {
            spec.limits.check(h.width, h.height)?;
            let (rect, mirror) = spec.plan(h.height, h.width, key.0, key.1, key.2);
            let want = turbo::Want {
                rect,
                out_w: spec.width,
                out_h: spec.height,
                reduce: spec.resize == Resize::Fast,
            };
            let r = turbo::decode_region(bytes, Some(want))?;
            let part = Picture { width: r.width, height: r.height, rgb: r.rgb };
            if r.scale == 1.0 {
                // Full scale: the crop in the region's pixels, exactly.
                let outside = || corrupt(Media::Jpeg, "the decoded region does not hold the crop");
                let inner = Rect {
                    left: rect.left.checked_sub(r.x).ok_or_else(outside)?,
                    top: rect.top.checked_sub(r.y).ok_or_else(outside)?,
                    width: rect.width,
                    height: rect.height,
                };
                resize_rect(&part, inner, spec, out)?;
                finish(out, spec, mirror);
                return Ok(());
            }
            let s = r.scale;
            let (left, top) =
                (f64::from(rect.left) * s - f64::from(r.x), f64::from(rect.top) * s - f64::from(r.y));
            let (w, ht) = (f64::from(rect.width) * s, f64::from(rect.height) * s);
            resize_box(&part, (left, top, w, ht), spec, out)?;
            finish(out, spec, mirror);
            return Ok(());
        }
    }
    let picture = decode(bytes, &spec.limits)?;
    let (rect, mirror) = spec.plan(picture.height, picture.width, key.0, key.1, key.2);
    resize_into(&picture, rect, spec, out)?;
    finish(out, spec, mirror);
    Ok(())
}

/// Mirrors the rows of a rendered picture when `mirror` says so.
fn finish(out: &mut [u8], spec: &Render, mirror: bool) {
    if mirror {
        for row in out.chunks_exact_mut(spec.width as usize * 3) {
            mirror_row(row);
        }
    }
}

fn resize_into(picture: &Picture, rect: Rect, spec: &Render, out: &mut [u8]) -> Result<(), ImageError> {
    if let Crop::None = spec.crop {
        if (picture.width, picture.height) != (spec.width, spec.height) {
            return Err(ImageError::WrongSize {
                width: picture.width,
                height: picture.height,
                want_w: spec.width,
                want_h: spec.height,
            });
        }
        out.copy_from_slice(&picture.rgb);
        return Ok(());
    }
    resize_rect(picture, rect, spec, out)
}

/// Crops `rect` out of `picture`, then resizes it into `out`: the filter sees only the crop (its
/// edges are the picture's edges), as torchvision's `resized_crop` and Pillow's
/// `crop(...).resize(...)` do.
fn resize_rect(picture: &Picture, rect: Rect, spec: &Render, out: &mut [u8]) -> Result<(), ImageError> {
    if picture.width == 0 || picture.height == 0 || rect.width == 0 || rect.height == 0 {
        return Err(ImageError::Spec("the image has no pixels".into()));
    }
    let spec_err = |e: &dyn std::fmt::Display| ImageError::Spec(e.to_string());
    if spec.resize == Resize::Exact {
        let inside = u64::from(rect.left) + u64::from(rect.width) <= u64::from(picture.width)
            && u64::from(rect.top) + u64::from(rect.height) <= u64::from(picture.height);
        if !inside {
            return Err(ImageError::Spec("the crop lies outside the image".into()));
        }
        let stride = picture.width as usize * 3;
        let at = rect.top as usize * stride + rect.left as usize * 3;
        let part = pillow::View { rgb: &picture.rgb[at..], stride, width: rect.width, height: rect.height };
        let whole = [0.0, 0.0, rect.width as f32, rect.height as f32];
        pillow::resize(&part, whole, spec.width, spec.height, out);
        return Ok(());
    }
    let src = ImageRef::new(picture.width, picture.height, &picture.rgb, PixelType::U8x3)
        .map_err(|e| spec_err(&e))?;
    let part =
        CroppedImage::new(&src, rect.left, rect.top, rect.width, rect.height).map_err(|e| spec_err(&e))?;
    let mut dst =
        Image::from_slice_u8(spec.width, spec.height, out, PixelType::U8x3).map_err(|e| spec_err(&e))?;
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    Resizer::new().resize(&part, &mut dst, &options).map_err(|e| spec_err(&e))
}

/// Resizes the box `(left, top, width, height)` of `picture` (fractional pixels) into `out`.
#[cfg(feature = "turbo")]
fn resize_box(
    picture: &Picture,
    crop: (f64, f64, f64, f64),
    spec: &Render,
    out: &mut [u8],
) -> Result<(), ImageError> {
    if picture.width == 0 || picture.height == 0 {
        return Err(ImageError::Spec("the image has no pixels".into()));
    }
    let src = ImageRef::new(picture.width, picture.height, &picture.rgb, PixelType::U8x3)
        .map_err(|e| ImageError::Spec(e.to_string()))?;
    let mut dst = Image::from_slice_u8(spec.width, spec.height, out, PixelType::U8x3)
        .map_err(|e| ImageError::Spec(e.to_string()))?;
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear))
        .crop(crop.0, crop.1, crop.2, crop.3);
    Resizer::new().resize(&src, &mut dst, &options).map_err(|e| ImageError::Spec(e.to_string()))
}

fn mirror_row(row: &mut [u8]) {
    let n = row.len() / 3;
    for i in 0..n / 2 {
        let j = n - 1 - i;
        for c in 0..3 {
            row.swap(i * 3 + c, j * 3 + c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG of the given RGB pixels, made by zune-png's encoder.
    fn png(width: usize, height: usize, rgb: &[u8]) -> Vec<u8> {
        let options = zune_core::options::EncoderOptions::new(
            width,
            height,
            ColorSpace::RGB,
            zune_core::bit_depth::BitDepth::Eight,
        );
        let mut out = Vec::new();
        zune_png::PngEncoder::new(rgb, options).encode(&mut out).unwrap();
        out
    }

    fn gradient(width: usize, height: usize) -> Vec<u8> {
        (0..width * height).flat_map(|i| [(i % width) as u8, (i / width) as u8, 7]).collect()
    }

    #[test]
    fn png_round_trips_exactly() {
        let rgb = gradient(13, 9);
        let bytes = png(13, 9, &rgb);
        let h = header(&bytes).unwrap();
        assert_eq!((h.media, h.width, h.height, h.orientation), (Media::Png, 13, 9, 1));
        let p = decode(&bytes, &Limits::default()).unwrap();
        assert_eq!((p.width, p.height), (13, 9));
        assert_eq!(p.rgb, rgb);
    }

    #[test]
    fn bad_records_are_typed_errors() {
        assert_eq!(decode(b"", &Limits::default()), Err(ImageError::Empty));
        assert!(matches!(decode(b"hello world", &Limits::default()), Err(ImageError::NotAnImage(_))));
        let bytes = png(13, 9, &gradient(13, 9));
        for cut in [8, 20, 33, bytes.len() / 2, bytes.len() - 13] {
            let got = decode(&bytes[..cut], &Limits::default());
            assert!(matches!(got, Err(ImageError::Corrupt { media: Media::Png, .. })), "cut {cut}: {got:?}");
        }
        let small = Limits { max_pixels: 100 };
        assert_eq!(decode(&bytes, &small), Err(ImageError::TooLarge { width: 13, height: 9, limit: 100 }));
    }

    #[test]
    fn orientation_moves_pixels_where_exif_says() {
        // A 3x2 picture whose pixels are numbered 0..6 in the red channel.
        let p = Picture { width: 3, height: 2, rgb: (0..6u8).flat_map(|i| [i, 0, 0]).collect() };
        let red = |p: &Picture| p.rgb.iter().step_by(3).copied().collect::<Vec<u8>>();
        assert_eq!(red(&orient(p.clone(), 1)), [0, 1, 2, 3, 4, 5]);
        assert_eq!(red(&orient(p.clone(), 2)), [2, 1, 0, 5, 4, 3]);
        assert_eq!(red(&orient(p.clone(), 3)), [5, 4, 3, 2, 1, 0]);
        assert_eq!(red(&orient(p.clone(), 4)), [3, 4, 5, 0, 1, 2]);
        // 6: rotate 90° clockwise to display. Stored rows [0 1 2] / [3 4 5] show as columns.
        let six = orient(p.clone(), 6);
        assert_eq!((six.width, six.height), (2, 3));
        assert_eq!(red(&six), [3, 0, 4, 1, 5, 2]);
        assert_eq!(red(&orient(p.clone(), 8)), [2, 5, 1, 4, 0, 3]);
        assert_eq!(red(&orient(p.clone(), 5)), [0, 3, 1, 4, 2, 5]);
        assert_eq!(red(&orient(p, 7)), [5, 2, 4, 1, 3, 0]);
    }

    #[test]
    fn render_with_no_crop_and_a_mirror_reverses_rows() {
        let rgb = gradient(4, 2);
        let bytes = png(4, 2, &rgb);
        let spec = Render {
            height: 2,
            width: 4,
            crop: Crop::None,
            resize: Resize::Fast,
            flip: 1.0,
            limits: Limits::default(),
        };
        let mut out = vec![0u8; spec.output_bytes()];
        render(&bytes, &spec, (0, 0, 0), &mut out).unwrap();
        let reds: Vec<u8> = out.iter().step_by(3).copied().collect();
        assert_eq!(reds, [3, 2, 1, 0, 3, 2, 1, 0]);
        let wrong = Render { height: 3, ..spec };
        let mut out = vec![0u8; wrong.output_bytes()];
        assert!(matches!(render(&bytes, &wrong, (0, 0, 0), &mut out), Err(ImageError::WrongSize { .. })));
    }

    #[test]
    fn render_is_keyed_by_seed_step_and_record() {
        let bytes = png(64, 48, &gradient(64, 48));
        let spec = Render {
            height: 16,
            width: 16,
            crop: Crop::RANDOM_RESIZED,
            resize: Resize::Fast,
            flip: 0.5,
            limits: Limits::default(),
        };
        let run = |key| {
            let mut out = vec![0u8; spec.output_bytes()];
            render(&bytes, &spec, key, &mut out).unwrap();
            out
        };
        assert_eq!(run((1, 2, 3)), run((1, 2, 3)));
        let others = [(1, 2, 4), (1, 3, 3), (2, 2, 3)];
        assert!(others.iter().all(|&k| run(k) != run((1, 2, 3))));
    }

    #[test]
    fn specs_are_checked() {
        let ok = Render {
            height: 8,
            width: 8,
            crop: Crop::RANDOM_RESIZED,
            resize: Resize::Fast,
            flip: 0.5,
            limits: Limits::default(),
        };
        assert!(ok.validate().is_ok());
        assert!(Render { height: 0, ..ok }.validate().is_err());
        assert!(Render { flip: 1.5, ..ok }.validate().is_err());
        assert!(Render { crop: Crop::RandomResized { scale: [0.5, 0.1], ratio: [1.0, 1.0] }, ..ok }
            .validate()
            .is_err());
        assert!(Render { crop: Crop::RandomResized { scale: [0.1, 0.5], ratio: [f64::NAN, 1.0] }, ..ok }
            .validate()
            .is_err());
    }

    /// Small pictures from Pillow (32x24 gradients): baseline and progressive JPEG, lossy WebP.
    const JPEG: &[u8] = include_bytes!("image/testdata/small.jpg");
    const PROGRESSIVE: &[u8] = include_bytes!("image/testdata/small_progressive.jpg");
    const WEBP: &[u8] = include_bytes!("image/testdata/small.webp");

    #[test]
    fn every_format_decodes_and_renders() {
        let png_bytes = png(32, 24, &gradient(32, 24));
        for (bytes, media) in [
            (JPEG, Media::Jpeg),
            (PROGRESSIVE, Media::Jpeg),
            (WEBP, Media::Webp),
            (&png_bytes[..], Media::Png),
        ] {
            let h = header(bytes).unwrap();
            assert_eq!((h.media, h.width, h.height), (media, 32, 24));
            let p = decode(bytes, &Limits::default()).unwrap();
            assert_eq!((p.width, p.height, p.rgb.len()), (32, 24, 32 * 24 * 3));
            for crop in [Crop::Center, Crop::RANDOM_RESIZED] {
                let fast = Render {
                    height: 8,
                    width: 12,
                    crop,
                    resize: Resize::Fast,
                    flip: 0.5,
                    limits: Limits::default(),
                };
                let exact = Render { resize: Resize::Exact, ..fast };
                let (mut a, mut b) = (vec![0u8; fast.output_bytes()], vec![0u8; fast.output_bytes()]);
                render(bytes, &fast, (1, 2, 3), &mut a).unwrap();
                render(bytes, &exact, (1, 2, 3), &mut b).unwrap();
                assert!(a.iter().any(|&v| v != 0));
                // The same crop and filter; only the rounding (and, for JPEGs, the DCT scale) differ.
                let most = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).max().unwrap();
                assert!(most <= 8, "{media:?} {crop:?}: {most}");
            }
        }
        // Truncated JPEGs are errors, not grey-filled pictures.
        for cut in [JPEG.len() / 2, JPEG.len() - 20] {
            assert!(
                matches!(decode(&JPEG[..cut], &Limits::default()), Err(ImageError::Corrupt { .. })),
                "cut {cut}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Damaged bytes of every format: flipped bytes and a cut end give a picture or an error,
        /// never a panic (libjpeg-turbo's errors unwind out of C and are caught).
        #[test]
        fn damaged_images_never_panic(
            which in 0usize..4,
            flips in proptest::collection::vec((0usize..4096, 0u8..=255), 0..8),
            keep in 0.0f64..=1.0,
        ) {
            let png_bytes = png(32, 24, &gradient(32, 24));
            let source: &[u8] = [JPEG, PROGRESSIVE, WEBP, &png_bytes[..]][which];
            let mut bytes = source.to_vec();
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] = v;
            }
            bytes.truncate(((bytes.len() as f64) * keep) as usize);
            let _ = header(&bytes);
            let _ = decode(&bytes, &Limits { max_pixels: 1 << 20 });
            for resize in [Resize::Fast, Resize::Exact] {
                let limits = Limits { max_pixels: 1 << 20 };
                let spec = Render { height: 8, width: 8, crop: Crop::RANDOM_RESIZED, resize, flip: 0.5, limits };
                let mut out = vec![0u8; spec.output_bytes()];
                let _ = render(&bytes, &spec, (0, 0, 0), &mut out);
            }
        }
    }

    #[test]
    fn media_values() {
        assert_eq!(Media::schema_value(&[Media::Png, Media::Png]), "png");
        assert_eq!(Media::schema_value(&[Media::Png, Media::Jpeg]), "mixed");
        assert_eq!(Media::sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some(Media::Webp));
    }
}
