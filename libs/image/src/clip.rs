//! CLIP's image preprocessing as transformers' `CLIPImageProcessor` (the Pillow one) does it:
//! resize so the shortest edge is `size` (Pillow bicubic on 8-bit pixels), centre crop to
//! `crop_size` (zero padding where the image is smaller), rescale by 1/255 (in f64, then f32),
//! subtract the mean and divide by the standard deviation (in f32), channels first.
//! Read from the model directory's `preprocessor_config.json` when there is one; a `size` of
//! `{height, width}` (SigLIP's processors) resizes to exactly that.

use std::path::Path;

use serde::Deserialize;

use crate::resize::bicubic_resize;
use crate::{ImageError, Rgb8};

/// How images become the model's input.
#[derive(Debug, Clone, PartialEq)]
pub struct Processor {
    pub resize: Option<Resize>,
    /// `(height, width)` of the centre crop, or `None`.
    pub crop: Option<(usize, usize)>,
    /// `None`: no rescale.
    pub rescale_factor: Option<f64>,
    /// `None`: no normalisation.
    pub mean_std: Option<([f32; 3], [f32; 3])>,
}

/// How the image is resized first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// The shortest edge to this many pixels, the aspect ratio kept.
    ShortestEdge(usize),
    /// Exactly `(height, width)`.
    Exact(usize, usize),
}

/// OpenAI CLIP's mean and standard deviation, digit for digit as its preprocessor config
/// writes them (the f32 they round to is what matters).
pub const CLIP_MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_73];
#[allow(clippy::excessive_precision)]
pub const CLIP_STD: [f32; 3] = [0.268_629_54, 0.261_302_58, 0.275_777_11];

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default = "yes")]
    do_resize: bool,
    size: Option<serde_json::Value>,
    #[serde(default = "yes")]
    do_center_crop: bool,
    crop_size: Option<serde_json::Value>,
    #[serde(default = "yes")]
    do_rescale: bool,
    rescale_factor: Option<f64>,
    #[serde(default = "yes")]
    do_normalize: bool,
    image_mean: Option<[f32; 3]>,
    image_std: Option<[f32; 3]>,
    resample: Option<u32>,
}

fn yes() -> bool {
    true
}

impl Processor {
    /// `openai/clip-vit-*`'s processor at `size` pixels (224 or 336).
    pub fn clip(size: usize) -> Processor {
        Processor {
            resize: Some(Resize::ShortestEdge(size)),
            crop: Some((size, size)),
            rescale_factor: Some(1.0 / 255.0),
            mean_std: Some((CLIP_MEAN, CLIP_STD)),
        }
    }

    /// The processor `dir/preprocessor_config.json` describes, or CLIP's at `default_size`
    /// when the file is absent.
    pub fn from_dir(dir: &Path, default_size: usize) -> Result<Processor, ImageError> {
        let path = dir.join("preprocessor_config.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Processor::clip(default_size)),
            Err(e) => return Err(ImageError::Config { path: path.display().to_string(), reason: e.to_string() }),
        };
        Processor::from_json(&text, default_size).map_err(|reason| ImageError::Config { path: path.display().to_string(), reason })
    }

    /// [`Processor::from_dir`] from the file's text.
    pub fn from_json(text: &str, default_size: usize) -> Result<Processor, String> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if raw.resample.is_some_and(|r| r != 3) {
            return Err(format!("resample {:?}: only bicubic (3) is supported", raw.resample));
        }
        let dims = |v: &serde_json::Value, what: &str| -> Result<Resize, String> {
            let get = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).map(|n| n as usize);
            match (v.as_u64(), get("shortest_edge"), get("height"), get("width")) {
                (Some(n), ..) => Ok(Resize::ShortestEdge(n as usize)),
                (None, Some(n), ..) => Ok(Resize::ShortestEdge(n)),
                (None, None, Some(h), Some(w)) => Ok(Resize::Exact(h, w)),
                _ => Err(format!("{what} {v}: expected a number, {{shortest_edge}} or {{height, width}}")),
            }
        };
        let resize = match (raw.do_resize, &raw.size) {
            (false, _) => None,
            (true, Some(v)) => Some(dims(v, "size")?),
            (true, None) => Some(Resize::ShortestEdge(default_size)),
        };
        let crop = match (raw.do_center_crop, &raw.crop_size) {
            (false, _) => None,
            (true, Some(v)) => match dims(v, "crop_size")? {
                Resize::ShortestEdge(n) => Some((n, n)),
                Resize::Exact(h, w) => Some((h, w)),
            },
            (true, None) => Some((default_size, default_size)),
        };
        Ok(Processor {
            resize,
            crop,
            rescale_factor: raw.do_rescale.then(|| raw.rescale_factor.unwrap_or(1.0 / 255.0)),
            mean_std: raw.do_normalize.then(|| (raw.image_mean.unwrap_or(CLIP_MEAN), raw.image_std.unwrap_or(CLIP_STD))),
        })
    }

    /// The size of the model's input, `(height, width)`, for an image of `(h, w)`.
    pub fn output_size(&self, h: usize, w: usize) -> (usize, usize) {
        let (h, w) = self.resized_size(h, w);
        self.crop.unwrap_or((h, w))
    }

    /// transformers' `get_resize_output_image_size` (not square by default).
    pub(crate) fn resized_size(&self, h: usize, w: usize) -> (usize, usize) {
        match self.resize {
            None => (h, w),
            Some(Resize::Exact(rh, rw)) => (rh, rw),
            Some(Resize::ShortestEdge(size)) => {
                let (short, long) = if w <= h { (w, h) } else { (h, w) };
                let new_long = ((size * long) as f64 / short as f64) as usize;
                if w <= h { (new_long, size) } else { (size, new_long) }
            }
        }
    }

    /// The resized and cropped image, still 8-bit (what the parity test compares).
    pub fn resize_and_crop(&self, img: &Rgb8) -> Rgb8 {
        let (h, w) = self.resized_size(img.height, img.width);
        let resized = bicubic_resize(img, w, h);
        match self.crop {
            Some((ch, cw)) => center_crop(&resized, ch, cw),
            None => resized,
        }
    }

    /// The model's input for `img`, `[3 × H × W]` f32, written into `out`: through the image
    /// size's [`Plan`](crate::plan::Plan) (only the pixels the crop keeps are resized), or, where
    /// the crop pads, the whole image resized and cropped.
    pub fn pixel_values_into(&self, img: &Rgb8, out: &mut Vec<f32>) {
        match self.plan(img.width, img.height) {
            Some(plan) => plan.apply(img, &self.table(), out),
            None => self.full_pixel_values_into(img, out),
        }
    }

    /// The model's input for an encoded image, decoded as [`crate::decode`] decodes it: the
    /// CPU path of every image `image_embedder` does not decode on the GPU.
    #[cfg(feature = "decode")]
    pub fn pixel_values_of(&self, bytes: &[u8]) -> Result<Vec<f32>, ImageError> {
        let img = crate::decode(bytes)?;
        let mut px = Vec::new();
        self.pixel_values_into(&img, &mut px);
        Ok(px)
    }

    /// [`Processor::pixel_values_into`] the long way: the whole image resized, cropped (and
    /// padded), each byte normalised through [`Processor::table`].
    pub fn full_pixel_values_into(&self, img: &Rgb8, out: &mut Vec<f32>) {
        let img = self.resize_and_crop(img);
        let table = self.table();
        let plane = img.width * img.height;
        out.clear();
        out.resize(3 * plane, 0.0);
        for (i, px) in img.data.chunks_exact(3).enumerate() {
            for c in 0..3 {
                out[c * plane + i] = table[c * 256 + usize::from(px[c])];
            }
        }
    }
}

/// transformers' `center_crop`: the middle `(ch, cw)`, rounding the offset down, the image
/// padded with zeros first where it is smaller than the crop.
pub fn center_crop(img: &Rgb8, ch: usize, cw: usize) -> Rgb8 {
    let (nh, nw) = (img.height.max(ch), img.width.max(cw));
    // Where the image sits in the padded canvas (`ceil` of half the padding, as transformers).
    let (top_pad, left_pad) = ((nh - img.height).div_ceil(2), (nw - img.width).div_ceil(2));
    let (top, left) = ((img.height as isize - ch as isize).div_euclid(2), (img.width as isize - cw as isize).div_euclid(2));
    let (top, left) = (top + top_pad as isize, left + left_pad as isize);
    let mut data = vec![0u8; ch * cw * 3];
    for y in 0..ch {
        let cy = top + y as isize - top_pad as isize;
        if cy < 0 || cy >= img.height as isize {
            continue;
        }
        for x in 0..cw {
            let cx = left + x as isize - left_pad as isize;
            if cx < 0 || cx >= img.width as isize {
                continue;
            }
            let src = (cy as usize * img.width + cx as usize) * 3;
            data[(y * cw + x) * 3..(y * cw + x) * 3 + 3].copy_from_slice(&img.data[src..src + 3]);
        }
    }
    Rgb8 { width: cw, height: ch, data }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_transformers() {
        let p = Processor::clip(224);
        assert_eq!(p.resized_size(480, 640), (224, 298));
        assert_eq!(p.resized_size(1000, 333), (672, 224));
        assert_eq!(p.output_size(1000, 333), (224, 224));
        let siglip = Processor::from_json(r#"{"size": {"height": 384, "width": 384}, "do_center_crop": false}"#, 224).unwrap();
        assert_eq!(siglip.output_size(480, 640), (384, 384));
        assert!(Processor::from_json(r#"{"resample": 2}"#, 224).is_err());
        let openai = r#"{"crop_size": 224, "do_center_crop": true, "do_normalize": true, "do_resize": true,
            "feature_extractor_type": "CLIPFeatureExtractor", "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "size": 224}"#;
        assert_eq!(Processor::from_json(openai, 336).unwrap(), Processor::clip(224));
    }

    #[test]
    fn a_small_image_is_padded_with_zeros_around_its_middle() {
        let img = Rgb8 { width: 2, height: 1, data: vec![1, 1, 1, 2, 2, 2] };
        let c = center_crop(&img, 3, 4);
        // 4 wide: one column of padding each side; 3 high: one row above, one below.
        let row = |y: usize| c.data[y * 12..(y + 1) * 12].to_vec();
        assert_eq!(row(0), vec![0; 12]);
        assert_eq!(row(1), vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 0]);
        assert_eq!(row(2), vec![0; 12]);
    }
}
