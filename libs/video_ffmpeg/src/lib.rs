//! FFmpeg for the video stages, behind three small types:
//!
//! - [`decode`]: every frame of a video, in presentation order, decoded by libavcodec from
//!   the packets of our own demuxer ([`curator_video::Demuxer`], the same packets NVDEC gets),
//!   frame-threaded; the caller may stop early.
//! - [`Scaler`]: a frame to the target size and pixel format (libswscale, area filter).
//! - [`ClipEncoder`]: frames into an MP4 file (libx264 when FFmpeg has it, else MPEG-4 Part 2),
//!   written under a temporary name and renamed when finished.

use std::path::{Path, PathBuf};

use curator_video::{Codec, Demuxer};
pub use ffmpeg_next as ff;

/// Packet times cross as microseconds.
const MICROS: ff::Rational = ff::Rational(1, 1_000_000);

fn codec_id(c: &Codec) -> Option<ff::codec::Id> {
    Some(match c {
        Codec::H264 => ff::codec::Id::H264,
        Codec::Hevc => ff::codec::Id::HEVC,
        Codec::Vp9 => ff::codec::Id::VP9,
        Codec::Av1 => ff::codec::Id::AV1,
        Codec::Other(_) => return None,
    })
}

/// Decode `demuxer`'s video, calling `each(frame, pts_seconds)` in presentation order until
/// it returns `Ok(false)` or the video ends. Damaged packets are counted and skipped (FFmpeg
/// conceals what it can); a video that yields no frame at all is an error.
pub fn decode(
    mut demuxer: Demuxer,
    threads: usize,
    mut each: impl FnMut(&ff::frame::Video, f64) -> Result<bool, String>,
) -> Result<u64, String> {
    ff::init().map_err(|e| format!("FFmpeg: {e}"))?;
    let probe = demuxer.probe.clone();
    let id = codec_id(&probe.codec).ok_or_else(|| format!("codec {} cannot be decoded", probe.codec.name()))?;
    let codec = ff::decoder::find(id).ok_or_else(|| format!("this FFmpeg has no {} decoder", probe.codec.name()))?;
    let mut ctx = ff::codec::context::Context::new_with_codec(codec);
    // SAFETY: the context is fresh and owned here; extradata is allocated with av_mallocz
    // (FFmpeg frees it with the context) with the padding FFmpeg's readers expect.
    unsafe {
        let p = ctx.as_mut_ptr();
        if !probe.config.is_empty() {
            let n = probe.config.len();
            let buf = ff::ffi::av_mallocz(n + ff::ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize) as *mut u8;
            if buf.is_null() {
                return Err("out of memory for the codec configuration".into());
            }
            std::ptr::copy_nonoverlapping(probe.config.as_ptr(), buf, n);
            (*p).extradata = buf;
            (*p).extradata_size = n as i32;
        }
        (*p).pkt_timebase = MICROS.into();
    }
    ctx.set_threading(ff::threading::Config { kind: ff::threading::Type::Frame, count: threads, ..Default::default() });
    let mut decoder = ctx.decoder().video().map_err(|e| format!("cannot open the {} decoder: {e}", probe.codec.name()))?;
    let mut frame = ff::frame::Video::empty();
    let (mut packets, mut refused, mut frames) = (0u64, 0u64, 0u64);
    let mut last_error = String::new();
    let mut more = true;
    let mut drain = |decoder: &mut ff::decoder::Video, more: &mut bool, frames: &mut u64| -> Result<(), String> {
        while *more && decoder.receive_frame(&mut frame).is_ok() {
            *frames += 1;
            *more = each(&frame, frame.timestamp().unwrap_or(0) as f64 / 1e6)?;
        }
        Ok(())
    };
    while more {
        let Some(p) = demuxer.next_packet().map_err(|e| e.reason())? else { break };
        packets += 1;
        let mut pkt = ff::Packet::copy(&p.data);
        pkt.set_pts(Some((p.pts * 1e6).round() as i64));
        pkt.set_dts(Some((p.dts * 1e6).round() as i64));
        if p.keyframe {
            pkt.set_flags(ff::packet::Flags::KEY);
        }
        if let Err(e) = decoder.send_packet(&pkt) {
            refused += 1;
            last_error = e.to_string();
        }
        drain(&mut decoder, &mut more, &mut frames)?;
    }
    if more {
        let _ = decoder.send_eof();
        drain(&mut decoder, &mut more, &mut frames)?;
    }
    if frames == 0 && packets > 0 {
        let why = if last_error.is_empty() { String::new() } else { format!(": {last_error}") };
        return Err(format!("decoded no frames from {packets} packets ({refused} refused by the decoder{why})"));
    }
    Ok(frames)
}

/// Frames to one size and pixel format; rebuilt when the input's format or size changes.
pub struct Scaler {
    to: (ff::format::Pixel, u32, u32),
    ctx: Option<(ff::software::scaling::Context, (ff::format::Pixel, u32, u32))>,
    out: ff::frame::Video,
}

impl Scaler {
    pub fn new(pixel: ff::format::Pixel, width: u32, height: u32) -> Scaler {
        Scaler { to: (pixel, width, height), ctx: None, out: ff::frame::Video::empty() }
    }

    /// `frame` scaled; the result is valid until the next call.
    pub fn run(&mut self, frame: &ff::frame::Video) -> Result<&ff::frame::Video, String> {
        let key = (frame.format(), frame.width(), frame.height());
        if self.ctx.as_ref().map(|(_, k)| *k) != Some(key) {
            let (pixel, w, h) = self.to;
            let c = ff::software::scaling::Context::get(key.0, key.1, key.2, pixel, w, h, ff::software::scaling::Flags::AREA)
                .map_err(|e| format!("cannot scale {}x{} {:?}: {e}", key.1, key.2, key.0))?;
            self.ctx = Some((c, key));
            self.out = ff::frame::Video::empty();
        }
        let Some((c, _)) = self.ctx.as_mut() else { return Err("no scaler".into()) };
        c.run(frame, &mut self.out).map_err(|e| format!("scaling: {e}"))?;
        Ok(&self.out)
    }

    /// The scaled frame's pixels as packed rows (`bytes_per_pixel` each), without padding.
    pub fn packed(&mut self, frame: &ff::frame::Video, bytes_per_pixel: usize) -> Result<Vec<u8>, String> {
        let (_, w, h) = self.to;
        let out = self.run(frame)?;
        let (stride, row) = (out.stride(0), w as usize * bytes_per_pixel);
        let data = out.data(0);
        let mut pixels = Vec::with_capacity(row * h as usize);
        for y in 0..h as usize {
            pixels.extend_from_slice(&data[y * stride..y * stride + row]);
        }
        Ok(pixels)
    }
}

/// How a clip is encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Encoding {
    /// MP4: libx264 at quality `crf` (MPEG-4 Part 2 where FFmpeg has no libx264).
    Mp4 { crf: u32 },
    /// Animated WebP (libwebp, lossy): `quality` 0-100, `compression_level` 0-6, looping
    /// forever (NeMo Curator's previews: quality 50, level 6).
    Webp { quality: u32, compression_level: u32 },
}

/// One clip being written: frames in, an MP4 (or animated WebP) file out.
pub struct ClipEncoder {
    output: ff::format::context::Output,
    encoder: ff::encoder::video::Encoder,
    scaler: Scaler,
    stream_tb: ff::Rational,
    /// One frame's duration in milliseconds (packets carry it, so the MP4's edit list covers
    /// the last frame too).
    frame_ms: i64,
    tmp: PathBuf,
    path: PathBuf,
    frames: u64,
    /// An RGB or grey frame from packed pixels, reused.
    packed: Option<ff::frame::Video>,
}

/// Encoder time base: milliseconds.
const MILLIS: ff::Rational = ff::Rational(1, 1000);

impl ClipEncoder {
    /// Start `path` (written as `.<name>.tmp-<pid>.mp4` beside it until [`ClipEncoder::finish`]):
    /// `width` × `height` (rounded down to even) at about `fps`, quality `crf` (libx264).
    pub fn create(path: &Path, width: u32, height: u32, fps: f64, crf: u32) -> Result<ClipEncoder, String> {
        ClipEncoder::create_as(path, width, height, fps, Encoding::Mp4 { crf })
    }

    /// Start `path` encoded as `encoding` (the temporary name keeps the file's extension, which
    /// picks the container).
    pub fn create_as(path: &Path, width: u32, height: u32, fps: f64, encoding: Encoding) -> Result<ClipEncoder, String> {
        ff::init().map_err(|e| format!("FFmpeg: {e}"))?;
        let (w, h) = (width & !1, height & !1);
        if w == 0 || h == 0 {
            return Err(format!("cannot encode {width}x{height} frames"));
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let ext = path.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_else(|| "mp4".into());
        let tmp = path.with_file_name(format!(".{name}.tmp-{}.{ext}", std::process::id()));
        let mut output = ff::format::output(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        let global_header = output.format().flags().contains(ff::format::Flags::GLOBAL_HEADER);
        let codec = match encoding {
            Encoding::Mp4 { .. } => ff::encoder::find_by_name("libx264")
                .or_else(|| ff::encoder::find(ff::codec::Id::MPEG4))
                .ok_or("this FFmpeg has neither libx264 nor an MPEG-4 encoder")?,
            Encoding::Webp { .. } => ff::encoder::find_by_name("libwebp_anim").ok_or("this FFmpeg has no libwebp_anim encoder")?,
        };
        let mut stream = output.add_stream(codec).map_err(|e| format!("adding a stream: {e}"))?;
        let mut enc = ff::codec::context::Context::new_with_codec(codec).encoder().video().map_err(|e| e.to_string())?;
        enc.set_width(w);
        enc.set_height(h);
        enc.set_format(ff::format::Pixel::YUV420P);
        enc.set_time_base(MILLIS);
        let rate = ff::Rational((fps.max(0.001) * 1000.0).round() as i32, 1000);
        enc.set_frame_rate(Some(rate));
        if global_header {
            enc.set_flags(ff::codec::Flags::GLOBAL_HEADER);
        }
        let mut opts = ff::Dictionary::new();
        let mut muxer_opts = ff::Dictionary::new();
        match encoding {
            Encoding::Mp4 { crf } if codec.name() == "libx264" => {
                opts.set("crf", &crf.to_string());
                opts.set("preset", "veryfast");
            }
            Encoding::Mp4 { .. } => enc.set_bit_rate((w as usize * h as usize * 4).max(200_000)),
            Encoding::Webp { quality, compression_level } => {
                opts.set("lossless", "0");
                opts.set("quality", &quality.min(100).to_string());
                opts.set("compression_level", &compression_level.min(6).to_string());
                muxer_opts.set("loop", "0");
            }
        }
        let encoder = enc.open_with(opts).map_err(|e| format!("opening the {} encoder: {e}", codec.name()))?;
        stream.set_parameters(&encoder);
        stream.set_time_base(MILLIS);
        output.write_header_with(muxer_opts).map_err(|e| format!("{}: writing the header: {e}", tmp.display()))?;
        let stream_tb = output.stream(0).map(|s| s.time_base()).unwrap_or(MILLIS);
        Ok(ClipEncoder {
            output,
            encoder,
            scaler: Scaler::new(ff::format::Pixel::YUV420P, w, h),
            stream_tb,
            frame_ms: (1000.0 / fps.max(0.001)).round() as i64,
            tmp,
            path: path.to_path_buf(),
            frames: 0,
            packed: None,
        })
    }

    /// Add a frame of packed pixels (`channels` 3: RGB, 1: grey) of `width` × `height`, shown
    /// `t` seconds after the clip's start; scaled to the clip's size.
    pub fn push_packed(&mut self, pixels: &[u8], width: u32, height: u32, channels: usize, t: f64) -> Result<(), String> {
        let format = if channels == 3 { ff::format::Pixel::RGB24 } else { ff::format::Pixel::GRAY8 };
        let row = width as usize * channels;
        if pixels.len() != row * height as usize {
            return Err(format!("a frame of {} bytes is not {width}x{height}x{channels}", pixels.len()));
        }
        let mut frame = match self.packed.take() {
            Some(f) if f.format() == format && f.width() == width && f.height() == height => f,
            _ => ff::frame::Video::new(format, width, height),
        };
        let stride = frame.stride(0);
        let data = frame.data_mut(0);
        for y in 0..height as usize {
            data[y * stride..y * stride + row].copy_from_slice(&pixels[y * row..(y + 1) * row]);
        }
        let pushed = self.push(&frame, t);
        self.packed = Some(frame);
        pushed
    }

    fn write_packets(&mut self) -> Result<(), String> {
        let mut pkt = ff::Packet::empty();
        while self.encoder.receive_packet(&mut pkt).is_ok() {
            pkt.set_stream(0);
            if pkt.duration() == 0 {
                pkt.set_duration(self.frame_ms);
            }
            pkt.rescale_ts(MILLIS, self.stream_tb);
            pkt.write_interleaved(&mut self.output).map_err(|e| format!("{}: {e}", self.tmp.display()))?;
        }
        Ok(())
    }

    /// Add `frame`, shown `t` seconds after the clip's start.
    pub fn push(&mut self, frame: &ff::frame::Video, t: f64) -> Result<(), String> {
        let scaled = self.scaler.run(frame)?;
        let mut f = scaled.clone();
        f.set_pts(Some((t * 1000.0).round() as i64));
        self.encoder.send_frame(&f).map_err(|e| format!("encoding: {e}"))?;
        self.frames += 1;
        self.write_packets()
    }

    /// Flush, write the trailer and give the file its final name; returns the frames written.
    pub fn finish(mut self) -> Result<u64, String> {
        self.encoder.send_eof().map_err(|e| format!("encoding: {e}"))?;
        self.write_packets()?;
        self.output.write_trailer().map_err(|e| format!("{}: {e}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        Ok(self.frames)
    }
}

impl Drop for ClipEncoder {
    fn drop(&mut self) {
        // Unfinished: never leave a partial file (the temp name is gone after `finish`).
        let _ = std::fs::remove_file(&self.tmp);
    }
}
