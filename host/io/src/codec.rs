//! Compressed JSONL: which codec a file uses, told by its magic bytes whatever its name, and
//! a reader that decodes it (every member, stream or frame of a concatenated file). Formats
//! that are not JSONL at all (Parquet, zip) are refused by name rather than read as text.

use std::io::{BufRead, BufReader, Read};

use super::IoError;

/// A compression format a JSONL input may be stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
    Bzip2,
    Xz,
    Lz4,
}

/// File name endings of compressed files, and their codecs.
pub const COMPRESSED_EXTENSIONS: &[(&str, Codec)] = &[
    (".gz", Codec::Gzip),
    (".zst", Codec::Zstd),
    (".zstd", Codec::Zstd),
    (".bz2", Codec::Bzip2),
    (".xz", Codec::Xz),
    (".lz4", Codec::Lz4),
];

const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0];
const LZ4_FRAME_MAGIC: &[u8] = &[0x04, 0x22, 0x4d, 0x18];
const LZ4_LEGACY_MAGIC: &[u8] = &[0x02, 0x21, 0x4c, 0x18];
/// A bzip2 stream's first block header, or the end-of-stream marker of an empty stream.
const BZ2_BLOCK: &[u8] = &[0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
const BZ2_END: &[u8] = &[0x17, 0x72, 0x45, 0x38, 0x50, 0x90];

impl Codec {
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
            Codec::Bzip2 => "bzip2",
            Codec::Xz => "xz",
            Codec::Lz4 => "lz4",
        }
    }

    /// The codec a file name's ending says.
    pub fn from_name(name: &str) -> Option<Codec> {
        let lower = name.to_lowercase();
        COMPRESSED_EXTENSIONS.iter().find(|(ext, _)| lower.ends_with(ext)).map(|(_, c)| *c)
    }

    /// The codec of a file that starts with `head` (at least its first 10 bytes when it has
    /// them), or `None` for anything else.
    pub fn sniff(head: &[u8]) -> Option<Codec> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Codec::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Codec::Zstd)
        } else if head.starts_with(XZ_MAGIC) {
            Some(Codec::Xz)
        } else if head.starts_with(LZ4_FRAME_MAGIC) {
            Some(Codec::Lz4)
        } else if head.len() >= 10
            && head.starts_with(b"BZh")
            && (b'1'..=b'9').contains(&head[3])
            && (head[4..10] == *BZ2_BLOCK || head[4..10] == *BZ2_END)
        {
            Some(Codec::Bzip2)
        } else {
            None
        }
    }
}

/// Why a file that starts with `head` cannot be read as JSONL at all, if it cannot.
fn refused(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"PAR1") {
        Some("this is a Parquet file: name it *.parquet or set source.format: parquet")
    } else if head.starts_with(b"PK\x03\x04") {
        Some("this is a zip archive, which is not read: unpack it, or recompress it as gzip, zstd, bzip2, xz or lz4")
    } else if head.starts_with(LZ4_LEGACY_MAGIC) {
        Some("this is an lz4 file in the legacy format, which is not read: recompress it with `lz4` (frame format)")
    } else if head.starts_with(&[0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c]) {
        Some("this is a 7z archive, which is not read: unpack it")
    } else {
        None
    }
}

/// Whether a file whose first bytes are `head` may be read as plain text (and so cut into
/// byte ranges): not compressed, and not a format [`decoded`] refuses.
pub fn is_plain(head: &[u8]) -> bool {
    Codec::sniff(head).is_none() && refused(head).is_none()
}

/// Whether the file at `loc` may be read as plain text (its first bytes, one small read).
pub fn starts_plain(loc: &super::Loc, size: u64) -> Result<bool, IoError> {
    let head = loc.read_range(0, size.min(16))?;
    Ok(is_plain(&head))
}

/// Wrap a reader, decoding it when its magic bytes name a [`Codec`], whatever its name;
/// formats that are not JSONL (Parquet, zip, 7z, legacy lz4) are refused, naming the file.
pub fn decoded(raw: Box<dyn Read + Send>, name: &str) -> Result<Box<dyn BufRead + Send>, IoError> {
    let open_err = |source| IoError::Open { path: name.to_string(), source };
    let mut file = BufReader::with_capacity(1 << 20, raw);
    let head = file.fill_buf().map_err(open_err)?;
    if let Some(why) = refused(head) {
        return Err(IoError::Open { path: name.to_string(), source: std::io::Error::new(std::io::ErrorKind::InvalidData, why) });
    }
    let codec = Codec::sniff(head);
    let buffered = |r: Box<dyn Read + Send>| -> Box<dyn BufRead + Send> { Box::new(BufReader::with_capacity(1 << 20, r)) };
    Ok(match codec {
        None => Box::new(file),
        Some(Codec::Gzip) => buffered(Box::new(flate2::bufread::MultiGzDecoder::new(file))),
        Some(Codec::Zstd) => buffered(Box::new(zstd::stream::read::Decoder::with_buffer(file).map_err(open_err)?)),
        Some(Codec::Bzip2) => buffered(Box::new(bzip2::bufread::MultiBzDecoder::new(file))),
        Some(Codec::Xz) => buffered(Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(file))),
        Some(Codec::Lz4) => buffered(Box::new(Lz4Frames { frame: Some(lz4_flex::frame::FrameDecoder::new(file)) })),
    })
}

/// LZ4 frames one after another (as `lz4` and parallel writers concatenate them): lz4_flex
/// decodes one frame, this starts the next where it ended.
struct Lz4Frames<R: BufRead> {
    frame: Option<lz4_flex::frame::FrameDecoder<R>>,
}

impl<R: BufRead> Read for Lz4Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(frame) = self.frame.as_mut() else { return Ok(0) };
            let n = frame.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(frame) = self.frame.take() else { return Ok(0) };
            let mut rest = frame.into_inner();
            if rest.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.frame = Some(lz4_flex::frame::FrameDecoder::new(rest));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const PLAIN: &[u8] = b"{\"text\":\"a\"}\n{\"text\":\"b\"}\n{\"text\":\"c\"}\n";

    fn decode_all(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        decoded(Box::new(std::io::Cursor::new(bytes)), "f.jsonl")
            .map_err(|e| e.to_string())?
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// `PLAIN` compressed in two parts (members, streams or frames) concatenated, as
    /// parallel compressors (pigz, pbzip2, `xz -T`, zstdmt) write them.
    fn concatenated(codec: Codec) -> Vec<u8> {
        let mut out = Vec::new();
        for part in PLAIN.chunks(17) {
            match codec {
                Codec::Gzip => {
                    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    e.write_all(part).unwrap();
                    out.extend(e.finish().unwrap());
                }
                Codec::Zstd => out.extend(zstd::encode_all(part, 3).unwrap()),
                Codec::Bzip2 => {
                    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                    e.write_all(part).unwrap();
                    out.extend(e.finish().unwrap());
                }
                Codec::Xz => {
                    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
                    e.write_all(part).unwrap();
                    out.extend(e.finish().unwrap());
                }
                Codec::Lz4 => {
                    let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                    e.write_all(part).unwrap();
                    out.extend(e.finish().unwrap());
                }
            }
        }
        out
    }

    #[test]
    fn every_codec_is_told_by_its_bytes_and_read_whole() {
        for codec in [Codec::Gzip, Codec::Zstd, Codec::Bzip2, Codec::Xz, Codec::Lz4] {
            let bytes = concatenated(codec);
            assert_eq!(Codec::sniff(&bytes[..10]), Some(codec), "{codec:?}");
            assert_eq!(decode_all(bytes).unwrap(), PLAIN, "{codec:?}");
        }
        assert_eq!(decode_all(PLAIN.to_vec()).unwrap(), PLAIN);
        assert_eq!(Codec::sniff(b"BZh9 is not a bzip2 header"), None);
    }

    #[test]
    fn names_give_codecs() {
        assert_eq!(Codec::from_name("a/b.JSONL.BZ2"), Some(Codec::Bzip2));
        assert_eq!(Codec::from_name("x.jsonl.zstd"), Some(Codec::Zstd));
        assert_eq!(Codec::from_name("x.jsonl"), None);
    }

    #[test]
    fn other_formats_are_refused_by_name() {
        for (head, says) in [(&b"PAR1\x15\x04"[..], "Parquet"), (b"PK\x03\x04rest", "zip"), (b"\x02\x21\x4c\x18xx", "legacy")] {
            let e = decode_all(head.to_vec()).unwrap_err();
            assert!(e.contains("f.jsonl") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_truncated_stream_is_an_error_not_a_short_file() {
        for codec in [Codec::Gzip, Codec::Zstd, Codec::Bzip2, Codec::Xz, Codec::Lz4] {
            let bytes = concatenated(codec);
            let cut = bytes[..bytes.len() - 6].to_vec();
            assert!(decode_all(cut).is_err(), "{codec:?}");
        }
    }
}
