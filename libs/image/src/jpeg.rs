//! A JPEG's frame header, read from its markers without decoding anything: size, components,
//! sampling, coding process. What the GPU path needs to decide, before a batch goes to nvJPEG's
//! hardware decoder, whether an image can go there at all (baseline or extended sequential
//! Huffman, 8 bits, grey or YCbCr at 4:4:4, 4:2:2, 4:2:0 or 4:4:0) or takes the CPU path.

/// What the frame header (SOFn) and the Adobe marker say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JpegHeader {
    pub width: usize,
    pub height: usize,
    /// The SOF marker's low nibble: 0 baseline, 1 extended sequential, 2 progressive, 3
    /// lossless, 9+ arithmetic coding.
    pub process: u8,
    pub precision: u8,
    /// Each component's (horizontal, vertical) sampling factors.
    pub sampling: Vec<(u8, u8)>,
    /// The Adobe APP14 marker's colour transform (0: RGB or CMYK as stored), if present.
    pub adobe_transform: Option<u8>,
}

impl JpegHeader {
    /// Whether nvJPEG's batched hardware decoder takes it (and decodes it as Pillow does, RGB
    /// from YCbCr or grey).
    pub fn gpu_decodable(&self) -> bool {
        let sequential = matches!(self.process, 0 | 1) && self.precision == 8;
        let layout = match self.sampling.as_slice() {
            [_] => true,
            [y, cb, cr] => cb == &(1, 1) && cr == &(1, 1) && matches!(y, (1, 1) | (2, 1) | (2, 2) | (1, 2)),
            _ => false,
        };
        // An Adobe marker with transform 0 on three components means RGB stored as is.
        let ycbcr = !(self.sampling.len() == 3 && self.adobe_transform == Some(0));
        sequential && layout && ycbcr && self.width > 0 && self.height > 0
    }
}

/// The header of a JPEG (`None` if the bytes are not one, or end before its frame header).
pub fn header(bytes: &[u8]) -> Option<JpegHeader> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut at = 2;
    let mut adobe_transform = None;
    loop {
        // Markers may be padded with 0xFF bytes.
        while bytes.get(at) == Some(&0xFF) && bytes.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        if bytes.get(at) != Some(&0xFF) {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        at += 2;
        if matches!(marker, 0x01 | 0xD0..=0xD7) {
            continue; // no length
        }
        let len = usize::from(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]));
        let body = bytes.get(at + 2..at + len)?;
        match marker {
            // SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC).
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                let (&precision, rest) = body.split_first()?;
                let height = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
                let width = usize::from(u16::from_be_bytes([*rest.get(2)?, *rest.get(3)?]));
                let n = usize::from(*rest.get(4)?);
                let sampling = (0..n).map(|c| rest.get(5 + 3 * c + 1).map(|s| (s >> 4, s & 0x0F))).collect::<Option<Vec<_>>>()?;
                return Some(JpegHeader { width, height, process: marker & 0x0F, precision, sampling, adobe_transform });
            }
            0xEE if body.starts_with(b"Adobe") => adobe_transform = body.get(11).copied(),
            0xDA | 0xD9 => return None, // scan or end before any frame header
            _ => {}
        }
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SOI, optional extra segments, then a frame header with the given marker and sampling.
    fn jpeg(sof: u8, precision: u8, sampling: &[u8], extra: &[u8]) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8];
        b.extend_from_slice(extra);
        let len = 8 + 3 * sampling.len();
        b.extend_from_slice(&[0xFF, sof, 0, len as u8, precision, 0x01, 0x90, 0x02, 0x80, sampling.len() as u8]);
        for (i, s) in sampling.iter().enumerate() {
            b.extend_from_slice(&[i as u8 + 1, *s, 0]);
        }
        b.extend_from_slice(&[0xFF, 0xDA, 0, 2]);
        b
    }

    #[test]
    fn the_frame_header_is_read_past_other_segments() {
        let app0 = [0xFF, 0xE0, 0, 6, b'J', b'F', b'I', b'F'];
        let h = header(&jpeg(0xC0, 8, &[0x22, 0x11, 0x11], &app0)).expect("header");
        assert_eq!((h.width, h.height, h.process, h.precision), (640, 400, 0, 8));
        assert_eq!(h.sampling, vec![(2, 2), (1, 1), (1, 1)]);
        assert!(h.gpu_decodable());
    }

    #[test]
    fn what_the_hardware_decoder_does_not_take_goes_to_the_cpu() {
        assert!(header(&jpeg(0xC0, 8, &[0x11], &[])).expect("grey").gpu_decodable());
        assert!(header(&jpeg(0xC1, 8, &[0x21, 0x11, 0x11], &[])).expect("4:2:2").gpu_decodable());
        assert!(!header(&jpeg(0xC2, 8, &[0x22, 0x11, 0x11], &[])).expect("progressive").gpu_decodable());
        assert!(!header(&jpeg(0xC0, 12, &[0x11, 0x11, 0x11], &[])).expect("12-bit").gpu_decodable());
        assert!(!header(&jpeg(0xC0, 8, &[0x41, 0x11, 0x11], &[])).expect("4:1:1").gpu_decodable());
        assert!(!header(&jpeg(0xC0, 8, &[0x11, 0x11, 0x11, 0x11], &[])).expect("CMYK").gpu_decodable());
        assert!(!header(&jpeg(0xC9, 8, &[0x11, 0x11, 0x11], &[])).expect("arithmetic").gpu_decodable());
        let adobe_rgb = [0xFF, 0xEE, 0, 14, b'A', b'd', b'o', b'b', b'e', 0, 100, 0, 0, 0, 0, 0];
        assert!(!header(&jpeg(0xC0, 8, &[0x11, 0x11, 0x11], &adobe_rgb)).expect("RGB").gpu_decodable());
    }

    #[test]
    fn what_is_not_a_jpeg_header_is_none() {
        assert_eq!(header(b"\x89PNG\r\n"), None);
        assert_eq!(header(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 40, 1]), None); // cut short
        assert_eq!(header(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2]), None); // a scan first
        let real =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/parity/images/photo-640x480-q90.jpg")).expect("test image");
        let h = header(&real).expect("Pillow's JPEG");
        assert_eq!((h.width, h.height), (640, 480));
        assert!(h.gpu_decodable(), "{h:?}");
    }
}
