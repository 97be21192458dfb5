//! Splitting a byte stream into lines without copying them: a line that lies whole in the
//! reader's buffer is handed out borrowed from it; only a line that straddles two buffer
//! fills is assembled in a spill buffer, and never beyond `max` bytes (a longer line keeps an
//! excerpt and is flagged), so memory stays bounded whatever the input holds.

use std::io::BufRead;

/// One line, without its `\n`.
pub struct Line<'a> {
    pub bytes: &'a [u8],
    /// Byte offset of its first byte in the stream (counted from where reading began).
    pub start: u64,
    /// Longer than `max`: `bytes` is only its first `excerpt` bytes.
    pub too_long: bool,
}

pub struct LineSplitter {
    input: Box<dyn BufRead + Send>,
    /// Offset of the next unread byte.
    offset: u64,
    max: usize,
    excerpt: usize,
    /// The start of a line whose end has not been read yet.
    spill: Vec<u8>,
    spill_start: u64,
    spill_too_long: bool,
    pending: bool,
}

impl LineSplitter {
    pub fn new(input: Box<dyn BufRead + Send>, offset: u64, max: usize, excerpt: usize) -> LineSplitter {
        LineSplitter { input, offset, max, excerpt, spill: Vec::new(), spill_start: 0, spill_too_long: false, pending: false }
    }

    /// Offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Skip to the start of the next line (for a byte range that begins mid-line).
    pub fn skip_line(&mut self) -> std::io::Result<()> {
        loop {
            let buf = self.input.fill_buf()?;
            if buf.is_empty() {
                return Ok(());
            }
            let (n, found) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            self.input.consume(n);
            self.offset += n as u64;
            if found {
                return Ok(());
            }
        }
    }

    /// Append `bytes` to the spilled line, keeping only an excerpt once it is over `max`.
    /// (Fields, not `&mut self`: `bytes` borrows the input's buffer.)
    fn spill(spill: &mut Vec<u8>, too_long: &mut bool, max: usize, excerpt: usize, bytes: &[u8]) {
        if *too_long {
            return;
        }
        if spill.len() + bytes.len() > max {
            *too_long = true;
            spill.truncate(excerpt);
            let room = excerpt.saturating_sub(spill.len());
            spill.extend_from_slice(&bytes[..bytes.len().min(room)]);
        } else {
            spill.extend_from_slice(bytes);
        }
    }

    fn take_spilled(&mut self, f: &mut dyn FnMut(Line<'_>) -> bool) -> bool {
        self.pending = false;
        let go = f(Line { bytes: &self.spill, start: self.spill_start, too_long: self.spill_too_long });
        self.spill.clear();
        self.spill_too_long = false;
        go
    }

    /// Hand the lines of the next buffer fill to `f`, in order, until `f` returns false (the
    /// line it was given is consumed) or the fill is used up. Returns false once the input is
    /// exhausted (a last line without `\n` included).
    pub fn next_lines(&mut self, f: &mut dyn FnMut(Line<'_>) -> bool) -> std::io::Result<bool> {
        let buf = self.input.fill_buf()?;
        if buf.is_empty() {
            if self.pending {
                self.take_spilled(f);
            }
            return Ok(false);
        }
        if self.pending {
            let Some(i) = memchr::memchr(b'\n', buf) else {
                let n = buf.len();
                Self::spill(&mut self.spill, &mut self.spill_too_long, self.max, self.excerpt, buf);
                self.input.consume(n);
                self.offset += n as u64;
                return Ok(true);
            };
            Self::spill(&mut self.spill, &mut self.spill_too_long, self.max, self.excerpt, &buf[..i]);
            self.input.consume(i + 1);
            self.offset += i as u64 + 1;
            self.take_spilled(f);
            return Ok(true);
        }
        let mut pos = 0usize;
        let mut go = true;
        while go {
            let Some(i) = memchr::memchr(b'\n', &buf[pos..]) else { break };
            let line = &buf[pos..pos + i];
            let too_long = line.len() > self.max;
            let bytes = if too_long { &line[..self.excerpt.min(line.len())] } else { line };
            go = f(Line { bytes, start: self.offset + pos as u64, too_long });
            pos += i + 1;
        }
        if go && pos < buf.len() {
            // The start of a line that the next fill completes.
            let rest = buf.len() - pos;
            self.spill_start = self.offset + pos as u64;
            self.pending = true;
            Self::spill(&mut self.spill, &mut self.spill_too_long, self.max, self.excerpt, &buf[pos..]);
            pos += rest;
        }
        self.input.consume(pos);
        self.offset += pos as u64;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(data: &[u8], buf: usize, max: usize) -> Vec<(Vec<u8>, u64, bool)> {
        let input = Box::new(std::io::BufReader::with_capacity(buf, std::io::Cursor::new(data.to_vec())));
        let mut s = LineSplitter::new(input, 0, max, 4);
        let mut out = Vec::new();
        while s
            .next_lines(&mut |l| {
                out.push((l.bytes.to_vec(), l.start, l.too_long));
                true
            })
            .unwrap()
        {}
        assert_eq!(s.offset(), data.len() as u64);
        out
    }

    #[test]
    fn lines_are_the_same_whatever_the_buffer_size() {
        let data = b"one\n\ntwo two\nthree three three\nno newline at the end";
        let want = collect(data, 1 << 16, 100);
        assert_eq!(want.len(), 5);
        assert_eq!(want[2], (b"two two".to_vec(), 5, false));
        assert_eq!(want[4].0, b"no newline at the end");
        for buf in 1..20 {
            assert_eq!(collect(data, buf, 100), want, "buffer of {buf} bytes");
        }
    }

    #[test]
    fn long_lines_keep_an_excerpt_and_the_rest_goes_on() {
        let data = b"short\nthis line is far too long\nok\n";
        for buf in [3, 7, 64] {
            let got = collect(data, buf, 10);
            assert_eq!(got[1], (b"this".to_vec(), 6, true), "buffer {buf}");
            assert_eq!(got[2], (b"ok".to_vec(), 32, false), "buffer {buf}");
        }
    }

    #[test]
    fn stopping_mid_fill_resumes_at_the_next_line() {
        let data = b"a\nb\nc\nd\n";
        let input = Box::new(std::io::BufReader::with_capacity(64, std::io::Cursor::new(data.to_vec())));
        let mut s = LineSplitter::new(input, 0, 100, 4);
        let mut seen = Vec::new();
        // Take one line per call.
        while s
            .next_lines(&mut |l| {
                seen.push(l.bytes.to_vec());
                false
            })
            .unwrap()
        {}
        assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    }
}
