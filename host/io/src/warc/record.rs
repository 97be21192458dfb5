//! WARC records from a file: the framing of WARC/1.0 and 1.1 (a version line, `Name: value`
//! headers, a blank line, `Content-Length` bytes of block, then CRLF CRLF). Files come plain,
//! as gzip members (Common Crawl's layout: one member per record, so each record's
//! compressed offset is known, the offset Common Crawl's index gives), or compressed whole
//! (zstd, bzip2, xz, or gzip as one member). A defect is an [`Item::Defect`]: the record is
//! skipped where the framing allows it, otherwise the rest of the file is.

use std::io::{BufRead, BufReader, Read};

use crate::{Codec, IoError};

/// Headers of a WARC record longer than this are a defect (they are a few hundred bytes).
const MAX_HEADER_BYTES: usize = 64 << 10;

/// The buffer over a gzip member's decoded bytes. Reads at least this long go to inflate
/// directly, so a page is decoded into its block without a copy; header lines are read from
/// the buffer.
const MEMBER_BUFFER: usize = 16 << 10;

/// One WARC record.
#[derive(Debug)]
pub struct Record {
    /// Where it starts: its gzip member's compressed offset, else its byte offset.
    pub offset: u64,
    pub headers: Vec<(String, String)>,
    pub block: Vec<u8>,
}

impl Record {
    /// The value of header `name` (case-insensitive), if the record has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A record that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Defect {
    /// Its gzip member's compressed offset, else its byte offset.
    pub offset: u64,
    pub reason: String,
    /// Nothing after it in the file can be read (the framing is lost).
    pub fatal: bool,
}

#[derive(Debug)]
pub enum Item {
    Record(Record),
    Defect(Defect),
}

/// A reader that counts the bytes taken from it.
struct Counting<R> {
    inner: R,
    pos: u64,
}

impl<R: BufRead> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.pos += n as u64;
        self.inner.consume(n);
    }
}

type Raw = Counting<Box<dyn BufRead + Send>>;

enum State {
    /// Uncompressed bytes (a plain file, or one compressed whole by another codec): offsets
    /// are positions in them.
    Stream(Raw),
    /// Inside the gzip member that starts at `start`; `index` records of it already read.
    Member {
        start: u64,
        index: u64,
        dec: Box<BufReader<flate2::bufread::GzDecoder<Raw>>>,
    },
    /// Between gzip members.
    Between(Raw),
    Done,
}

/// The records of one file, in order.
pub struct Records {
    state: State,
    /// Blocks longer than this are skipped without being held in memory.
    max_block: u64,
}

/// Why one record could not be read.
enum Bad {
    /// The bytes under the record could not be read (a truncated or corrupt compressed stream,
    /// or a read error): nothing after it can be.
    Io(std::io::Error),
    /// The framing is wrong: `skippable` when the block's end is still known.
    Format { reason: String, skippable: bool },
}

impl Records {
    /// Records of `raw` (`name` for errors): gzip members read one by one, other codecs told by
    /// their magic bytes decoded as a stream.
    pub fn open(raw: Box<dyn Read + Send>, name: &str, max_block: u64) -> Result<Records, IoError> {
        let mut file = BufReader::with_capacity(1 << 20, raw);
        let head = file.fill_buf().map_err(|source| IoError::Open { path: name.to_string(), source })?;
        let state = if Codec::sniff(head) == Some(Codec::Gzip) {
            State::Between(Counting { inner: Box::new(file), pos: 0 })
        } else {
            State::Stream(Counting { inner: crate::decoded(Box::new(file), name)?, pos: 0 })
        };
        Ok(Records { state, max_block })
    }

    /// The next record or defect; `None` at the end of the file (and after a fatal defect).
    pub fn next_item(&mut self) -> Option<Item> {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return None,
                State::Stream(mut raw) => {
                    // Skip the line ends between records before taking the offset.
                    if let Err(e) = skip_line_ends(&mut raw, usize::MAX) {
                        return Some(fatal(raw.pos, format!("read failed: {e}")));
                    }
                    let offset = raw.pos;
                    match read_record(&mut raw, self.max_block) {
                        Ok(None) => return None,
                        Ok(Some((headers, block))) => {
                            self.state = State::Stream(raw);
                            return Some(Item::Record(Record { offset, headers, block }));
                        }
                        Err(Bad::Io(e)) => return Some(fatal(offset, format!("record cut short: {e}"))),
                        Err(Bad::Format { reason, skippable: false }) => return Some(fatal(offset, reason)),
                        Err(Bad::Format { reason, skippable: true }) => {
                            self.state = State::Stream(raw);
                            return Some(Item::Defect(Defect { offset, reason, fatal: false }));
                        }
                    }
                }
                State::Between(mut raw) => {
                    let head = match raw.fill_buf() {
                        Ok(h) => h,
                        Err(e) => return Some(fatal(raw.pos, format!("read failed: {e}"))),
                    };
                    if head.is_empty() {
                        return None;
                    }
                    if head[0] != 0x1f || head.get(1).is_some_and(|&b| b != 0x8b) {
                        return Some(fatal(raw.pos, "bytes that are not a gzip member after the previous member".into()));
                    }
                    let start = raw.pos;
                    // A small buffer for the headers: a block's bytes bypass it (`read_block`).
                    let dec = Box::new(BufReader::with_capacity(MEMBER_BUFFER, flate2::bufread::GzDecoder::new(raw)));
                    self.state = State::Member { start, index: 0, dec };
                }
                State::Member { start, index, mut dec } => {
                    let at = |index: u64| if index == 0 { String::new() } else { format!(" (record {} of the member)", index + 1) };
                    if let Err(e) = skip_line_ends(&mut dec, usize::MAX) {
                        return Some(fatal(start, gzip_failure(&e)));
                    }
                    match read_record(&mut dec, self.max_block) {
                        Ok(None) => self.state = State::Between(dec.into_inner().into_inner()),
                        Ok(Some((headers, block))) => {
                            self.state = State::Member { start, index: index + 1, dec };
                            return Some(Item::Record(Record { offset: start, headers, block }));
                        }
                        Err(Bad::Io(e)) => return Some(fatal(start, format!("{}{}", gzip_failure(&e), at(index)))),
                        Err(Bad::Format { reason, skippable }) => {
                            // A member is self-delimiting: a bad record costs the rest of its member only.
                            let mut sink = std::io::sink();
                            let drained = if skippable { Ok(0) } else { std::io::copy(&mut dec, &mut sink) };
                            match drained {
                                Ok(_) => self.state = State::Member { start, index: index + 1, dec },
                                Err(e) => return Some(fatal(start, gzip_failure(&e))),
                            }
                            return Some(Item::Defect(Defect { offset: start, reason: format!("{reason}{}", at(index)), fatal: false }));
                        }
                    }
                }
            }
        }
    }
}

fn fatal(offset: u64, reason: String) -> Item {
    Item::Defect(Defect { offset, reason: format!("{reason}; the rest of the file is skipped"), fatal: true })
}

fn gzip_failure(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "truncated gzip member".into(),
        _ => format!("corrupt gzip member: {e}"),
    }
}

/// Consume up to `max` CR and LF bytes.
fn skip_line_ends(r: &mut impl BufRead, max: usize) -> std::io::Result<()> {
    let mut left = max;
    while left > 0 {
        let buf = r.fill_buf()?;
        let n = buf.iter().take(left).take_while(|&&b| b == b'\r' || b == b'\n').count();
        if n == 0 {
            return Ok(());
        }
        r.consume(n);
        left -= n;
    }
    Ok(())
}

/// One record from `r`, positioned at its version line; `None` at the end.
#[allow(clippy::type_complexity)]
fn read_record(r: &mut impl BufRead, max_block: u64) -> Result<Option<(Vec<(String, String)>, Vec<u8>)>, Bad> {
    let mut line = Vec::with_capacity(128);
    let mut header_bytes = 0usize;
    let mut headers: Vec<(String, String)> = Vec::with_capacity(16);
    let mut first = true;
    loop {
        line.clear();
        let n = r.by_ref().take((MAX_HEADER_BYTES - header_bytes) as u64 + 1).read_until(b'\n', &mut line).map_err(Bad::Io)?;
        if n == 0 {
            return if first {
                Ok(None)
            } else {
                Err(Bad::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "end of data inside the record's headers")))
            };
        }
        header_bytes += n;
        if header_bytes > MAX_HEADER_BYTES {
            return Err(Bad::Format { reason: format!("record headers longer than {MAX_HEADER_BYTES} bytes"), skippable: false });
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if first {
            if !text.starts_with("WARC/") {
                let excerpt: String = text.chars().take(60).collect();
                return Err(Bad::Format { reason: format!("expected a WARC version line, found {excerpt:?}"), skippable: false });
            }
            first = false;
            continue;
        }
        if text.is_empty() {
            break;
        }
        if text.starts_with([' ', '\t']) {
            // A folded line continues the header before it.
            match headers.last_mut() {
                Some((_, v)) => {
                    v.push(' ');
                    v.push_str(text.trim());
                }
                None => return Err(Bad::Format { reason: "a folded header line before any header".into(), skippable: false }),
            }
            continue;
        }
        let Some((name, value)) = text.split_once(':') else {
            let excerpt: String = text.chars().take(60).collect();
            return Err(Bad::Format { reason: format!("header line without a colon: {excerpt:?}"), skippable: false });
        };
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let length = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("Content-Length")).map(|(_, v)| v.as_str());
    let length: u64 = match length.map(str::parse) {
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            let v = length.unwrap_or_default();
            return Err(Bad::Format { reason: format!("Content-Length is not a number: {v:?}"), skippable: false });
        }
        None => return Err(Bad::Format { reason: "the record has no Content-Length".into(), skippable: false }),
    };
    if length > max_block {
        let skipped = std::io::copy(&mut r.by_ref().take(length), &mut std::io::sink()).map_err(Bad::Io)?;
        if skipped < length {
            return Err(Bad::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "end of data inside the record's block")));
        }
        skip_line_ends(r, 4).map_err(Bad::Io)?;
        return Err(Bad::Format {
            reason: format!("record block of {length} bytes is over max_line_bytes ({max_block})"),
            skippable: true,
        });
    }
    let block = read_block(r, length as usize).map_err(Bad::Io)?;
    skip_line_ends(r, 4).map_err(Bad::Io)?;
    Ok(Some((headers, block)))
}

/// The `length` bytes of a block. A buffered reader copies what it holds and hands a read at
/// least as long as its buffer to the reader under it: for a gzip member, inflate writes the
/// rest of the page where it will stay.
fn read_block(r: &mut impl BufRead, length: usize) -> std::io::Result<Vec<u8>> {
    let mut block = vec![0; length];
    let mut have = 0;
    while have < length {
        match r.read(&mut block[have..]) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("end of data after {have} of the block's {length} bytes"),
                ));
            }
            Ok(k) => have += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(block)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// A WARC record's bytes.
    pub(crate) fn record(kind: &str, headers: &[(&str, &str)], block: &[u8]) -> Vec<u8> {
        let mut out = format!("WARC/1.0\r\nWARC-Type: {kind}\r\n").into_bytes();
        for (n, v) in headers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", block.len()).as_bytes());
        out.extend_from_slice(block);
        out.extend_from_slice(b"\r\n\r\n");
        out
    }

    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn items(bytes: Vec<u8>, max_block: u64) -> Vec<Item> {
        let mut r = Records::open(Box::new(std::io::Cursor::new(bytes)), "t.warc", max_block).unwrap();
        std::iter::from_fn(|| r.next_item()).collect()
    }

    fn summary(items: &[Item]) -> Vec<String> {
        items
            .iter()
            .map(|i| match i {
                Item::Record(r) => format!("{}@{}:{}", r.header("warc-type").unwrap_or("?"), r.offset, String::from_utf8_lossy(&r.block)),
                Item::Defect(d) => format!("defect@{}{}: {}", d.offset, if d.fatal { " fatal" } else { "" }, d.reason),
            })
            .collect()
    }

    #[test]
    fn plain_and_whole_file_and_per_record_gzip_read_the_same_records() {
        let a = record("warcinfo", &[], b"software: test");
        let b = record("response", &[("WARC-Target-URI", "http://x/")], b"HTTP/1.1 200 OK\r\n\r\n<p>hi</p>");
        let plain = [a.clone(), b.clone()].concat();
        assert_eq!(
            summary(&items(plain.clone(), 1 << 20)),
            vec!["warcinfo@0:software: test".to_string(), format!("response@{}:HTTP/1.1 200 OK\r\n\r\n<p>hi</p>", a.len())]
        );
        let whole = summary(&items(gzip(&plain), 1 << 20));
        assert_eq!(whole, vec!["warcinfo@0:software: test".to_string(), "response@0:HTTP/1.1 200 OK\r\n\r\n<p>hi</p>".into()]);
        // One member per record: each record's offset is its member's.
        let (ga, gb) = (gzip(&a), gzip(&b));
        let members = summary(&items([ga.clone(), gb].concat(), 1 << 20));
        assert_eq!(members[1], format!("response@{}:HTTP/1.1 200 OK\r\n\r\n<p>hi</p>", ga.len()));
        // zstd, told by its magic bytes.
        let zst = zstd::encode_all(&plain[..], 3).unwrap();
        assert_eq!(summary(&items(zst, 1 << 20)).len(), 2);
    }

    #[test]
    fn blocks_longer_than_the_member_buffer_are_read_whole_and_a_short_one_is_cut() {
        // Past the buffer, a block is read straight from inflate (or the file).
        let big: Vec<u8> = (0..5 * MEMBER_BUFFER + 123).map(|i| (i * 7 % 251) as u8).collect();
        let (a, b) = (record("response", &[], &big), record("response", &[], b"next"));
        for file in [[gzip(&a), gzip(&b)].concat(), gzip(&[a.clone(), b.clone()].concat()), [a.clone(), b].concat()] {
            let got = items(file, 1 << 20);
            assert_eq!(got.len(), 2);
            assert!(matches!(&got[0], Item::Record(r) if r.block == big));
            assert!(matches!(&got[1], Item::Record(r) if r.block == b"next"));
        }
        let got = summary(&items(a[..a.len() - 1000].to_vec(), 1 << 20));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].contains(&format!("record cut short: end of data after {} of the block's {} bytes", big.len() - 996, big.len())),
            "{got:?}"
        );
    }

    #[test]
    fn a_truncated_member_is_a_fatal_defect_at_its_offset_after_the_good_ones() {
        let (ga, gb) = (gzip(&record("response", &[], b"one")), gzip(&record("response", &[], b"two")));
        let cut = [ga.clone(), gb[..gb.len() / 2].to_vec()].concat();
        let got = summary(&items(cut, 1 << 20));
        assert_eq!(got[0], "response@0:one");
        assert_eq!(got[1], format!("defect@{} fatal: truncated gzip member; the rest of the file is skipped", ga.len()));
        assert_eq!(got.len(), 2);
        // Garbage after the members.
        let got = summary(&items([ga.clone(), b"junk".to_vec()].concat(), 1 << 20));
        assert!(got[1].starts_with(&format!("defect@{} fatal: bytes that are not a gzip member", ga.len())), "{got:?}");
    }

    #[test]
    fn a_bad_record_in_a_member_costs_that_member_and_an_oversized_block_is_skipped() {
        let good = gzip(&record("response", &[], b"ok"));
        let bad = gzip(b"WARC/1.0\r\nWARC-Type: response\r\nno colon here\r\n\r\nxx");
        let big = gzip(&record("response", &[], &[b'x'; 100]));
        let got = summary(&items([bad.clone(), big.clone(), good.clone()].concat(), 50));
        assert_eq!(
            got,
            vec![
                "defect@0: header line without a colon: \"no colon here\"".to_string(),
                format!("defect@{}: record block of 100 bytes is over max_line_bytes (50)", bad.len()),
                format!("response@{}:ok", bad.len() + big.len()),
            ]
        );
        // In a plain file a framing error loses the rest; an oversized block does not.
        let plain = [record("response", &[], &[b'x'; 100]), record("response", &[], b"ok"), b"garbage\r\n".to_vec()].concat();
        let got = summary(&items(plain, 50));
        assert!(got[0].starts_with("defect@0: record block of 100"), "{got:?}");
        assert!(got[1].ends_with(":ok"), "{got:?}");
        assert!(got[2].contains("fatal: expected a WARC version line, found \"garbage\""), "{got:?}");
        // A block cut short.
        let cut = record("response", &[], b"0123456789");
        let got = summary(&items(cut[..cut.len() - 8].to_vec(), 1 << 20));
        assert!(got[0].starts_with("defect@0 fatal: record cut short"), "{got:?}");
    }
}
