//! Images for the image stages: bytes → RGB pixels ([`decode`]) → CLIP's input tensor
//! ([`clip::Processor`], transformers' `CLIPImageProcessor` to the bit: Pillow's bicubic
//! resize ([`resize`]), the centre crop, rescale and mean/std); NeMo Curator's aesthetic and
//! NSFW heads over the embeddings ([`heads`]).
//!
//! [`sniff`] tells an image's format from its first bytes without decoding (what the
//! WebDataset reader uses to refuse members that are not images); it needs no decoder, so the
//! host depends on this crate without the `decode` feature.

pub mod clip;
pub mod cv_linear;
pub mod heads;
pub mod jpeg;
pub mod plan;
pub mod resize;

/// An 8-bit RGB image, rows top to bottom, pixels interleaved (`RGBRGB…`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb8 {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

/// What can go wrong with an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot decode the image: {0}")]
    Decode(String),
    #[error("{path}: {reason}")]
    Config { path: String, reason: String },
}

/// The image formats the stages decode, by the extension WebDataset names them with.
pub const EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "webp", "gif", "bmp"];

/// The format of an encoded image from its magic bytes (`"jpeg"`, `"png"`, `"webp"`, `"gif"`,
/// `"bmp"`), or `None`.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xD8, 0xFF, ..] => Some("jpeg"),
        [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, ..] => Some("png"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("webp"),
        [b'G', b'I', b'F', b'8', b'7' | b'9', b'a', ..] => Some("gif"),
        [b'B', b'M', ..] if bytes.len() >= 26 => Some("bmp"),
        _ => None,
    }
}

/// [`sniff`], and whether the image is whole by its end: a JPEG ends with its EOI marker
/// (trailing zero padding allowed), a PNG with its `IEND` chunk, a GIF with its trailer, a
/// WebP's RIFF size covers the file. Catches the usual damage (a download cut short) without
/// decoding; damage inside the compressed data is the decoder's to find.
pub fn check(bytes: &[u8]) -> Result<&'static str, String> {
    let Some(format) = sniff(bytes) else {
        let head: String = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(format!("not an image (its first bytes: {head}, {} bytes)", bytes.len()));
    };
    let whole = match format {
        "jpeg" => {
            let end = bytes.iter().rposition(|&b| b != 0).unwrap_or(0);
            end >= 1 && bytes[end - 1..=end] == [0xFF, 0xD9]
        }
        "png" => bytes.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]),
        "gif" => bytes.last() == Some(&0x3B),
        "webp" => u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize + 8 <= bytes.len(),
        _ => true,
    };
    if whole { Ok(format) } else { Err(format!("the {format} image is cut short ({} bytes, no end marker)", bytes.len())) }
}

/// Decode an encoded image to RGB as Pillow's `Image.open(…).convert("RGB")` does: grey
/// replicated, alpha dropped (not blended), palettes looked up, EXIF orientation ignored.
/// JPEG is decoded by zune-jpeg (through the `image` crate), whose output can differ from
/// libjpeg-turbo's (Pillow's) by a unit on some pixels; the parity test states by how much.
#[cfg(feature = "decode")]
pub fn decode(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    let img = image::load_from_memory(bytes).map_err(|e| ImageError::Decode(e.to_string()))?;
    let rgb = img.into_rgb8();
    let (width, height) = (rgb.width() as usize, rgb.height() as usize);
    if width == 0 || height == 0 {
        return Err(ImageError::Decode(format!("the image is {width}×{height}")));
    }
    Ok(Rgb8 { width, height, data: rgb.into_raw() })
}

/// Encode `img` as a baseline JPEG of `quality` (1-100; what a served vision model is sent).
#[cfg(feature = "decode")]
pub fn encode_jpeg(img: &Rgb8, quality: u8) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::with_capacity(img.data.len() / 8);
    let (w, h) = (u32::try_from(img.width), u32::try_from(img.height));
    let (Ok(w), Ok(h)) = (w, h) else { return Err(ImageError::Decode(format!("the image is {}×{}", img.width, img.height))) };
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100))
        .encode(&img.data, w, h, image::ExtendedColorType::Rgb8)
        .map_err(|e| ImageError::Decode(format!("encoding a JPEG: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_told_by_their_magic_bytes() {
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 0]), Some("jpeg"));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some("png"));
        assert_eq!(sniff(b"RIFF\x10\0\0\0WEBPVP8 "), Some("webp"));
        assert_eq!(sniff(b"GIF89a.."), Some("gif"));
        assert_eq!(sniff(b"{\"caption\": 1}"), None);
        assert_eq!(sniff(b"BM"), None);
    }

    #[test]
    fn an_image_cut_short_is_told_by_its_end() {
        let jpeg = [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 0xFF, 0xD9];
        assert_eq!(check(&jpeg), Ok("jpeg"));
        assert_eq!(check(&[&jpeg[..], &[0, 0]].concat()), Ok("jpeg"));
        assert!(check(&jpeg[..7]).unwrap_err().contains("cut short"));
        let png = [&b"\x89PNG\r\n\x1a\n"[..], &[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]].concat();
        assert_eq!(check(&png), Ok("png"));
        assert!(check(&png[..png.len() - 1]).is_err());
        assert!(check(b"{}").unwrap_err().starts_with("not an image"));
    }

    #[cfg(feature = "decode")]
    #[test]
    fn a_broken_image_is_an_error_not_a_panic() {
        assert!(decode(b"\xFF\xD8\xFF\xE0 not really").is_err());
        assert!(decode(b"").is_err());
    }

    #[cfg(feature = "decode")]
    #[test]
    fn an_encoded_jpeg_decodes_to_nearly_the_same_pixels() {
        let data: Vec<u8> = (0..32 * 16).flat_map(|p| [(p % 32 * 8) as u8, (p / 32 * 16) as u8, 128]).collect();
        let img = Rgb8 { width: 32, height: 16, data };
        let bytes = encode_jpeg(&img, 95).unwrap();
        assert_eq!(check(&bytes), Ok("jpeg"));
        let back = decode(&bytes).unwrap();
        assert_eq!((back.width, back.height), (32, 16));
        let worst = back.data.iter().zip(&img.data).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        assert!(worst < 24, "{worst}");
    }
}
