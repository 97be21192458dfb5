//! ISO base media files (MP4, MOV, M4V): the first video track's sample table, read from the
//! `moov` box without touching the media data, and its samples read one at a time.
//!
//! Hand-written rather than the `mp4` crate: we need each sample's offset and size before
//! reading it (a file cut short is found from its table, before anything is decoded), the
//! `hvcC` parameter arrays, and every length checked against the box it lies in, since the
//! input is untrusted. It reads what video curation needs and skips the rest (edit lists are
//! ignored: presentation times start at the earliest frame).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use super::{Codec, Packet, Probe, VideoError};

/// Box types that may start an ISO media file.
const TOP_LEVEL: &[&[u8; 4]] =
    &[b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"uuid", b"pdin", b"styp", b"sidx", b"moof", b"meta", b"pnot"];

/// The largest `moov` read into memory (its sample tables are ~12 bytes a frame).
const MAX_MOOV: u64 = 512 << 20;

pub(super) fn is_box_type(t: &[u8]) -> bool {
    TOP_LEVEL.iter().any(|b| &b[..] == t)
}

/// A cursor over a box's payload; every read is bounds-checked.
struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

type Short = &'static str;

impl<'a> Cur<'a> {
    fn new(b: &'a [u8]) -> Self {
        Cur { b, at: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or("ends early")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, Short> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, Short> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().map_err(|_| "ends early")?))
    }
    fn u32(&mut self) -> Result<u32, Short> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| "ends early")?))
    }
    fn u64(&mut self) -> Result<u64, Short> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().map_err(|_| "ends early")?))
    }
    fn rest(&self) -> &'a [u8] {
        &self.b[self.at..]
    }
}

/// A box: its type and payload.
type Boxed<'a> = ([u8; 4], &'a [u8]);

/// The child boxes of a payload.
fn children(b: &[u8]) -> Result<Vec<Boxed<'_>>, String> {
    let mut out = Vec::new();
    let mut c = Cur::new(b);
    while c.at + 8 <= b.len() {
        let start = c.at;
        let size = c.u32()? as u64;
        let ty: [u8; 4] = c.take(4)?.try_into().map_err(|_| "ends early")?;
        let size = match size {
            0 => (b.len() - start) as u64,
            1 => c.u64()?,
            s => s,
        };
        let header = (c.at - start) as u64;
        if size < header || start as u64 + size > b.len() as u64 {
            return Err(format!("box {} claims {size} bytes, its parent has {}", fourcc(&ty), b.len() - start));
        }
        out.push((ty, &b[c.at..start + size as usize]));
        c.at = start + size as usize;
    }
    Ok(out)
}

fn child<'a>(b: &'a [u8], ty: &[u8; 4]) -> Result<Option<&'a [u8]>, String> {
    Ok(children(b)?.into_iter().find(|(t, _)| t == ty).map(|(_, p)| p))
}

fn fourcc(t: &[u8]) -> String {
    t.iter().map(|&c| if c.is_ascii_graphic() { c as char } else { '?' }).collect()
}

/// One sample of the video track.
#[derive(Debug, Clone, Copy)]
struct Sample {
    offset: u64,
    size: u32,
    /// Decode time, in the track's timescale.
    dts: i64,
    /// Presentation offset from `dts`.
    cts: i32,
    sync: bool,
}

/// The video track's samples, read in decode order.
pub struct Samples {
    file: File,
    path: String,
    samples: Vec<Sample>,
    timescale: f64,
    /// The earliest presentation time (subtracted so the video starts at 0).
    origin: i64,
    next: usize,
}

impl Samples {
    pub(super) fn next_packet(&mut self) -> Result<Option<Packet>, VideoError> {
        let Some(s) = self.samples.get(self.next).copied() else { return Ok(None) };
        self.next += 1;
        let io = |source| VideoError::Io { path: self.path.clone(), source };
        let mut data = vec![0u8; s.size as usize];
        self.file.seek(SeekFrom::Start(s.offset)).map_err(io)?;
        self.file.read_exact(&mut data).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                VideoError::Truncated { path: self.path.clone(), reason: format!("sample {} ends past the end of the file", self.next) }
            } else {
                VideoError::Io { path: self.path.clone(), source: e }
            }
        })?;
        let pts = (s.dts + s.cts as i64 - self.origin) as f64 / self.timescale;
        let dts = (s.dts - self.origin) as f64 / self.timescale;
        Ok(Some(Packet { data, pts, dts, keyframe: s.sync }))
    }
}

/// Read the `moov` box of an ISO media file and build the video track's sample table.
pub(super) fn open(mut file: File, size: u64, path: &str) -> Result<(Probe, Samples), VideoError> {
    let io = |source| VideoError::Io { path: path.to_string(), source };
    let truncated = |reason: String| VideoError::Truncated { path: path.to_string(), reason };
    // Walk the top-level boxes by their headers; read only `moov`.
    let mut at = 0u64;
    let mut moov = None;
    let mut fragmented = false;
    let mut first = true;
    while at + 8 <= size {
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        let mut h = [0u8; 16];
        let n = super::read_up_to(&mut file, &mut h).map_err(io)?;
        let ty: [u8; 4] = h[4..8].try_into().unwrap_or_default();
        if first && !is_box_type(&ty) {
            return Err(VideoError::NotVideo { path: path.into(), reason: format!("starts with box {:?}", fourcc(&ty)) });
        }
        first = false;
        let (len, header) = match u32::from_be_bytes([h[0], h[1], h[2], h[3]]) {
            0 => (size - at, 8),
            1 if n >= 16 => (u64::from_be_bytes(h[8..16].try_into().unwrap_or_default()), 16),
            1 => return Err(truncated(format!("box {} at byte {at} is cut off", fourcc(&ty)))),
            l => (l as u64, 8),
        };
        if len < header {
            return Err(VideoError::Corrupt { path: path.into(), reason: format!("box {} at byte {at} has size {len}", fourcc(&ty)) });
        }
        let end = at.checked_add(len).ok_or_else(|| truncated(format!("box {} at byte {at} has size {len}", fourcc(&ty))))?;
        if end > size {
            return Err(truncated(format!("box {} at byte {at} needs {len} bytes, the file ends at byte {size}", fourcc(&ty))));
        }
        fragmented |= &ty == b"moof";
        if &ty == b"moov" {
            if len - header > MAX_MOOV {
                return Err(VideoError::Unsupported { path: path.into(), reason: format!("moov box of {len} bytes") });
            }
            let mut payload = vec![0u8; (len - header) as usize];
            file.seek(SeekFrom::Start(at + header)).map_err(io)?;
            file.read_exact(&mut payload).map_err(io)?;
            moov = Some(payload);
        }
        at = end;
    }
    let Some(moov) = moov else {
        return Err(truncated("no moov box (the index an MP4 writer adds when it finishes)".into()));
    };
    let corrupt = |m: String| VideoError::Corrupt { path: path.to_string(), reason: m };
    let track = video_track(&moov).map_err(corrupt)?;
    let Some(track) = track else {
        return Err(VideoError::Unsupported { path: path.into(), reason: "no video track".into() });
    };
    if track.samples.is_empty() {
        let reason = if fragmented { "fragmented MP4 (frames in moof boxes) is not read yet" } else { "the video track has no frames" };
        return Err(VideoError::Unsupported { path: path.into(), reason: reason.into() });
    }
    let last_end = track.samples.iter().map(|s| s.offset + s.size as u64).max().unwrap_or(0);
    if last_end > size {
        let i = track.samples.iter().position(|s| s.offset + s.size as u64 > size).unwrap_or(0);
        return Err(truncated(format!(
            "frame {} of {} lies at bytes {}..{}, the file ends at byte {size}",
            i + 1,
            track.samples.len(),
            track.samples[i].offset,
            track.samples[i].offset + track.samples[i].size as u64
        )));
    }
    let timescale = track.timescale as f64;
    let origin = track.samples.iter().map(|s| s.dts + s.cts as i64).min().unwrap_or(0);
    let end = track.samples.iter().map(|s| s.dts + s.cts as i64).max().unwrap_or(0) + track.common_delta as i64;
    let duration_s = if track.samples.is_empty() { 0.0 } else { (end - origin) as f64 / timescale };
    let fps = if track.common_delta > 0 { timescale / track.common_delta as f64 } else { 0.0 };
    let probe = Probe {
        container: "mp4",
        codec: track.codec,
        width: track.width,
        height: track.height,
        fps,
        duration_s,
        num_frames: track.samples.len() as u64,
        config: track.config,
        size,
    };
    Ok((probe, Samples { file, path: path.to_string(), samples: track.samples, timescale, origin, next: 0 }))
}

struct Track {
    codec: Codec,
    width: u32,
    height: u32,
    config: Vec<u8>,
    timescale: u32,
    /// The commonest frame duration (defines the frame rate).
    common_delta: u32,
    samples: Vec<Sample>,
}

/// The first track whose handler is `vide`, with its sample table.
fn video_track(moov: &[u8]) -> Result<Option<Track>, String> {
    for (ty, trak) in children(moov)? {
        if &ty != b"trak" {
            continue;
        }
        let Some(mdia) = child(trak, b"mdia")? else { continue };
        let Some(hdlr) = child(mdia, b"hdlr")? else { continue };
        let mut h = Cur::new(hdlr);
        h.take(8)?; // version, flags, pre_defined
        if h.take(4)? != b"vide" {
            continue;
        }
        let mdhd = child(mdia, b"mdhd")?.ok_or("video track without mdhd")?;
        let mut m = Cur::new(mdhd);
        let version = m.u8()?;
        m.take(3)?;
        let timescale = if version == 1 {
            m.take(16)?;
            m.u32()?
        } else {
            m.take(8)?;
            m.u32()?
        };
        if timescale == 0 {
            return Err("mdhd timescale is 0".to_string());
        }
        let stbl = child(mdia, b"minf")?.map(|minf| child(minf, b"stbl")).transpose()?.flatten().ok_or("video track without stbl")?;
        let (codec, width, height, config) = sample_entry(child(stbl, b"stsd")?.ok_or("no stsd")?)?;
        let (samples, common_delta) = sample_table(stbl)?;
        return Ok(Some(Track { codec, width, height, config, timescale, common_delta, samples }));
    }
    Ok(None)
}

/// The first sample entry: codec, coded size and configuration record.
fn sample_entry(stsd: &[u8]) -> Result<(Codec, u32, u32, Vec<u8>), String> {
    let mut c = Cur::new(stsd);
    c.take(4)?; // version, flags
    if c.u32()? == 0 {
        return Err("stsd has no sample entry".to_string());
    }
    let entries = children(c.rest())?;
    let (ty, entry) = entries.first().ok_or("stsd has no sample entry")?;
    let codec = match ty {
        b"avc1" | b"avc3" => Codec::H264,
        b"hvc1" | b"hev1" => Codec::Hevc,
        b"vp09" => Codec::Vp9,
        b"av01" => Codec::Av1,
        other => Codec::Other(fourcc(other)),
    };
    // VisualSampleEntry: 6 reserved, data_reference_index, 16 bytes, width, height, then 50
    // bytes (resolutions, frame count, compressor name, depth, pre_defined) before children.
    let mut e = Cur::new(entry);
    e.take(24)?;
    let width = e.u16()? as u32;
    let height = e.u16()? as u32;
    e.take(50)?;
    let config_box: &[u8; 4] = match codec {
        Codec::H264 => b"avcC",
        Codec::Hevc => b"hvcC",
        Codec::Vp9 => b"vpcC",
        Codec::Av1 => b"av1C",
        Codec::Other(_) => return Ok((codec, width, height, Vec::new())),
    };
    let config = child(e.rest(), config_box)?.map(<[u8]>::to_vec).unwrap_or_default();
    if matches!(codec, Codec::H264 | Codec::Hevc) && config.is_empty() {
        return Err(format!("{} sample entry without its {} box", codec.name(), fourcc(config_box)));
    }
    Ok((codec, width, height, config))
}

/// Samples (offset, size, times, sync) from stsz, stco/co64, stsc, stts, ctts and stss.
fn sample_table(stbl: &[u8]) -> Result<(Vec<Sample>, u32), String> {
    let boxes = children(stbl)?;
    let get = |t: &[u8; 4]| boxes.iter().find(|(ty, _)| ty == t).map(|(_, p)| *p);
    // Sizes.
    let mut c = Cur::new(get(b"stsz").ok_or("no stsz")?);
    c.take(4)?;
    let fixed = c.u32()?;
    let count = c.u32()? as usize;
    if fixed == 0 && count > c.rest().len() / 4 {
        return Err(format!("stsz lists {count} samples in {} bytes", c.rest().len()));
    }
    if count > 100_000_000 {
        return Err(format!("stsz lists {count} samples"));
    }
    let mut sizes = Vec::with_capacity(count);
    for _ in 0..count {
        sizes.push(if fixed == 0 { c.u32()? } else { fixed });
    }
    // Chunk offsets.
    let (mut c, wide) = match (get(b"stco"), get(b"co64")) {
        (Some(b), _) => (Cur::new(b), false),
        (None, Some(b)) => (Cur::new(b), true),
        (None, None) => return Err("no stco or co64".to_string()),
    };
    c.take(4)?;
    let chunks = c.u32()? as usize;
    if chunks > c.rest().len() / if wide { 8 } else { 4 } {
        return Err("chunk offset table ends early".to_string());
    }
    let mut offsets = Vec::with_capacity(chunks);
    for _ in 0..chunks {
        offsets.push(if wide { c.u64()? } else { c.u32()? as u64 });
    }
    // Samples per chunk: runs of (first chunk, samples per chunk).
    let mut c = Cur::new(get(b"stsc").ok_or("no stsc")?);
    c.take(4)?;
    let runs = c.u32()? as usize;
    if runs > c.rest().len() / 12 {
        return Err("stsc ends early".to_string());
    }
    let mut stsc = Vec::with_capacity(runs);
    for _ in 0..runs {
        let first = c.u32()?;
        let per = c.u32()?;
        c.u32()?;
        stsc.push((first, per));
    }
    let mut samples = Vec::with_capacity(count);
    let mut s = 0usize;
    for (i, &(first, per)) in stsc.iter().enumerate() {
        let next_first = stsc.get(i + 1).map(|r| r.0).unwrap_or(chunks as u32 + 1);
        if first == 0 || next_first < first {
            return Err("stsc runs out of order".to_string());
        }
        for chunk in first..next_first {
            let mut off = *offsets.get(chunk as usize - 1).ok_or("stsc names a chunk past the offset table")?;
            for _ in 0..per {
                let Some(&size) = sizes.get(s) else { break };
                samples.push(Sample { offset: off, size, dts: 0, cts: 0, sync: true });
                off = off.checked_add(size as u64).ok_or("sample offset overflows")?;
                s += 1;
            }
        }
    }
    if samples.len() != count {
        return Err(format!("stsc places {} of {count} samples", samples.len()));
    }
    // Decode times.
    let mut c = Cur::new(get(b"stts").ok_or("no stts")?);
    c.take(4)?;
    let runs = c.u32()? as usize;
    let (mut i, mut t) = (0usize, 0i64);
    let mut deltas: Vec<(u32, u64)> = Vec::new();
    for _ in 0..runs {
        let n = c.u32()? as usize;
        let d = c.u32()?;
        for _ in 0..n {
            let Some(s) = samples.get_mut(i) else { break };
            s.dts = t;
            t += d as i64;
            i += 1;
        }
        match deltas.iter_mut().find(|(dd, _)| *dd == d) {
            Some((_, k)) => *k += n as u64,
            None => deltas.push((d, n as u64)),
        }
    }
    if i != count {
        return Err(format!("stts times {i} of {count} samples"));
    }
    let common_delta = deltas.iter().max_by_key(|(_, k)| *k).map(|(d, _)| *d).unwrap_or(0);
    // Presentation offsets (B-frames).
    if let Some(ctts) = get(b"ctts") {
        let mut c = Cur::new(ctts);
        let version = c.u8()?;
        c.take(3)?;
        let runs = c.u32()? as usize;
        let mut i = 0usize;
        for _ in 0..runs {
            let n = c.u32()? as usize;
            let raw = c.u32()?;
            let off = if version == 0 { raw.min(i32::MAX as u32) as i32 } else { raw as i32 };
            for _ in 0..n {
                let Some(s) = samples.get_mut(i) else { break };
                s.cts = off;
                i += 1;
            }
        }
    }
    // Sync samples (absent: every sample is one).
    if let Some(stss) = get(b"stss") {
        let mut c = Cur::new(stss);
        c.take(4)?;
        let n = c.u32()? as usize;
        samples.iter_mut().for_each(|s| s.sync = false);
        for _ in 0..n.min(count) {
            let k = c.u32()? as usize;
            if let Some(s) = k.checked_sub(1).and_then(|k| samples.get_mut(k)) {
                s.sync = true;
            }
        }
    }
    Ok((samples, common_delta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(ty: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut v = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
        v.extend_from_slice(ty);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn children_refuse_boxes_larger_than_their_parent() {
        let mut b = boxed(b"free", b"abcd");
        assert_eq!(children(&b).unwrap().len(), 1);
        b[3] = 200; // claims 200 bytes
        assert!(children(&b).unwrap_err().contains("claims 200 bytes"));
    }

    #[test]
    fn a_sample_table_reads_offsets_times_and_sync_samples() {
        let full = |v: &[u32]| {
            let mut p = vec![0u8; 4];
            v.iter().for_each(|x| p.extend_from_slice(&x.to_be_bytes()));
            p
        };
        let stbl = [
            boxed(b"stsz", &full(&[0, 3, 10, 20, 30])),
            boxed(b"stco", &full(&[2, 100, 1000])),
            boxed(b"stsc", &full(&[2, 1, 1, 1, 2, 2, 1])),
            boxed(b"stts", &full(&[1, 3, 512])),
            boxed(b"stss", &full(&[1, 1])),
        ]
        .concat();
        let (s, delta) = sample_table(&stbl).unwrap();
        assert_eq!(delta, 512);
        assert_eq!(
            s.iter().map(|s| (s.offset, s.size, s.dts, s.sync)).collect::<Vec<_>>(),
            [(100, 10, 0, true), (1000, 20, 512, false), (1020, 30, 1024, false)]
        );
        // A table naming more samples than its bytes hold is refused, not allocated.
        let bad = [boxed(b"stsz", &full(&[0, 1_000_000])), boxed(b"stco", &full(&[0]))].concat();
        assert!(sample_table(&bad).unwrap_err().contains("lists 1000000 samples"));
    }
}
