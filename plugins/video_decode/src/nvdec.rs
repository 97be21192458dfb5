//! NVDEC through the driver's `libnvcuvid` (loaded at run time, like CUDA itself, so the
//! plugin builds and loads on machines without a GPU). Our demuxer feeds the driver's parser
//! Annex B packets; the parser calls back (synchronously, inside `cuvidParseVideoData`) to
//! create the decoder when it sees the sequence header, to decode each picture, and to show
//! each picture in presentation order. The decoder's own scaler brings frames to the target
//! size on the device (`ulTargetWidth`/`ulTargetHeight`), so only the small NV12 surface is
//! copied to the host, where it becomes RGB or luma.
//!
//! The structures mirror NVIDIA's `nvcuvid.h` / `cuviddec.h` (NVDECODE API 9+, whose layouts
//! later SDKs keep: new fields took reserved space).

use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::sys as cu;
use curator_video::frames::{Frames, Sampler, Target};
use curator_video::nal;
use curator_video::{Codec, Demuxer};

type CUresult = c_int;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Rect16 {
    left: i16,
    top: i16,
    right: i16,
    bottom: i16,
}

#[repr(C)]
struct VideoFormat {
    codec: c_uint,
    frame_rate: [c_uint; 2],
    progressive_sequence: u8,
    bit_depth_luma_minus8: u8,
    bit_depth_chroma_minus8: u8,
    min_num_decode_surfaces: u8,
    coded_width: c_uint,
    coded_height: c_uint,
    display_area: [c_int; 4],
    chroma_format: c_uint,
    bitrate: c_uint,
    display_aspect_ratio: [c_int; 2],
    video_signal_description: [u8; 4],
    seqhdr_data_length: c_uint,
}

#[repr(C)]
struct ParserParams {
    codec_type: c_uint,
    max_num_decode_surfaces: c_uint,
    clock_rate: c_uint,
    error_threshold: c_uint,
    max_display_delay: c_uint,
    reserved1: [c_uint; 5],
    user_data: *mut c_void,
    sequence: Option<unsafe extern "C" fn(*mut c_void, *mut VideoFormat) -> c_int>,
    decode: Option<unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int>,
    display: Option<unsafe extern "C" fn(*mut c_void, *mut DispInfo) -> c_int>,
    reserved2: [*mut c_void; 7],
    ext_video_info: *mut c_void,
}

#[repr(C)]
struct SourcePacket {
    flags: c_ulong,
    payload_size: c_ulong,
    payload: *const u8,
    timestamp: i64,
}

#[repr(C)]
struct DispInfo {
    picture_index: c_int,
    progressive_frame: c_int,
    top_field_first: c_int,
    repeat_first_field: c_int,
    timestamp: i64,
}

#[repr(C)]
struct CreateInfo {
    width: c_ulong,
    height: c_ulong,
    num_decode_surfaces: c_ulong,
    codec_type: c_uint,
    chroma_format: c_uint,
    creation_flags: c_ulong,
    bit_depth_minus8: c_ulong,
    intra_decode_only: c_ulong,
    max_width: c_ulong,
    max_height: c_ulong,
    reserved1: c_ulong,
    display_area: Rect16,
    output_format: c_uint,
    deinterlace_mode: c_uint,
    target_width: c_ulong,
    target_height: c_ulong,
    num_output_surfaces: c_ulong,
    vid_lock: *mut c_void,
    target_rect: Rect16,
    reserved2: [c_ulong; 5],
}

#[repr(C)]
struct ProcParams {
    progressive_frame: c_int,
    second_field: c_int,
    top_field_first: c_int,
    unpaired_field: c_int,
    reserved_flags: c_uint,
    reserved_zero: c_uint,
    raw_input_dptr: u64,
    raw_input_pitch: c_uint,
    raw_input_format: c_uint,
    raw_output_dptr: u64,
    raw_output_pitch: c_uint,
    reserved1: c_uint,
    output_stream: *mut c_void,
    reserved: [c_uint; 46],
    reserved2: [*mut c_void; 2],
}

const PKT_ENDOFSTREAM: c_ulong = 0x01;
const PKT_TIMESTAMP: c_ulong = 0x02;
const CREATE_PREFER_CUVID: c_ulong = 0x04;
const SURFACE_NV12: c_uint = 0;
const DEINTERLACE_WEAVE: c_uint = 0;
const DEINTERLACE_ADAPTIVE: c_uint = 2;

/// The functions we use, resolved once.
struct Api {
    _lib: libloading::Library,
    create_parser: unsafe extern "C" fn(*mut *mut c_void, *mut ParserParams) -> CUresult,
    parse: unsafe extern "C" fn(*mut c_void, *mut SourcePacket) -> CUresult,
    destroy_parser: unsafe extern "C" fn(*mut c_void) -> CUresult,
    create_decoder: unsafe extern "C" fn(*mut *mut c_void, *mut CreateInfo) -> CUresult,
    destroy_decoder: unsafe extern "C" fn(*mut c_void) -> CUresult,
    decode_picture: unsafe extern "C" fn(*mut c_void, *mut c_void) -> CUresult,
    map: unsafe extern "C" fn(*mut c_void, c_int, *mut u64, *mut c_uint, *mut ProcParams) -> CUresult,
    unmap: unsafe extern "C" fn(*mut c_void, u64) -> CUresult,
}

impl Api {
    fn load() -> Result<Api, String> {
        // SAFETY: loading the driver's NVDEC library runs its initialisers only; every symbol
        // is typed as NVIDIA's headers declare it.
        unsafe {
            let lib = libloading::Library::new("libnvcuvid.so.1")
                .or_else(|_| libloading::Library::new("libnvcuvid.so"))
                .map_err(|e| format!("cannot load libnvcuvid (the NVIDIA driver's video decoder): {e}"))?;
            macro_rules! sym {
                ($name:literal) => {
                    *lib.get(concat!($name, "\0").as_bytes()).map_err(|e| format!("libnvcuvid has no {}: {e}", $name))?
                };
            }
            Ok(Api {
                create_parser: sym!("cuvidCreateVideoParser"),
                parse: sym!("cuvidParseVideoData"),
                destroy_parser: sym!("cuvidDestroyVideoParser"),
                create_decoder: sym!("cuvidCreateDecoder"),
                destroy_decoder: sym!("cuvidDestroyDecoder"),
                decode_picture: sym!("cuvidDecodePicture"),
                map: sym!("cuvidMapVideoFrame64"),
                unmap: sym!("cuvidUnmapVideoFrame64"),
                _lib: lib,
            })
        }
    }
}

/// An NVDEC decoder on GPU 0 (as `CUDA_VISIBLE_DEVICES` narrows it).
pub struct Nvdec {
    api: Api,
    ctx: Arc<CudaContext>,
}

/// What the parser's callbacks share with the caller of one decode.
struct State<'a> {
    api: &'a Api,
    decoder: *mut c_void,
    target: Target,
    /// The size NVDEC scales to (even), of which the target is the top-left part.
    surface: (usize, usize),
    sampler: Sampler,
    frames: Frames,
    host: Vec<u8>,
    error: Option<String>,
}

fn codec_type(c: &Codec) -> Option<c_uint> {
    Some(match c {
        Codec::H264 => 4,
        Codec::Hevc => 8,
        Codec::Vp9 => 10,
        Codec::Av1 => 11,
        Codec::Other(_) => return None,
    })
}

unsafe extern "C" fn on_sequence(user: *mut c_void, fmt: *mut VideoFormat) -> c_int {
    // SAFETY: `user` is the `State` that `decode` passed as the parser's user data and keeps
    // alive across every parse call; `fmt` is the driver's, valid for this call.
    let (s, f) = unsafe { (&mut *(user as *mut State), &*fmt) };
    if !s.decoder.is_null() {
        // A format change mid-stream: keep the decoder (same surfaces suffice for our samples).
        return f.min_num_decode_surfaces.max(1) as c_int;
    }
    if f.bit_depth_luma_minus8 != 0 {
        s.error = Some(format!("{}-bit video is not decoded on NVDEC yet (8-bit only)", 8 + f.bit_depth_luma_minus8));
        return 0;
    }
    let surfaces = (f.min_num_decode_surfaces as c_ulong).max(1) + 4;
    let [l, t, r, b] = f.display_area;
    let mut info = CreateInfo {
        width: f.coded_width as c_ulong,
        height: f.coded_height as c_ulong,
        num_decode_surfaces: surfaces,
        codec_type: f.codec,
        chroma_format: f.chroma_format,
        creation_flags: CREATE_PREFER_CUVID,
        bit_depth_minus8: 0,
        intra_decode_only: 0,
        max_width: f.coded_width as c_ulong,
        max_height: f.coded_height as c_ulong,
        reserved1: 0,
        display_area: Rect16 { left: l as i16, top: t as i16, right: r as i16, bottom: b as i16 },
        output_format: SURFACE_NV12,
        deinterlace_mode: if f.progressive_sequence != 0 { DEINTERLACE_WEAVE } else { DEINTERLACE_ADAPTIVE },
        target_width: s.surface.0 as c_ulong,
        target_height: s.surface.1 as c_ulong,
        num_output_surfaces: 2,
        vid_lock: std::ptr::null_mut(),
        target_rect: Rect16::default(),
        reserved2: [0; 5],
    };
    let mut dec = std::ptr::null_mut();
    // SAFETY: `info` is fully initialised and outlives the call.
    let rc = unsafe { (s.api.create_decoder)(&mut dec, &mut info) };
    if rc != 0 {
        s.error = Some(format!("cuvidCreateDecoder failed (CUresult {rc}) for {}x{}", f.coded_width, f.coded_height));
        return 0;
    }
    s.decoder = dec;
    surfaces as c_int
}

unsafe extern "C" fn on_decode(user: *mut c_void, pic: *mut c_void) -> c_int {
    // SAFETY: as in `on_sequence`; `pic` is the parser's picture parameters for this call.
    let s = unsafe { &mut *(user as *mut State) };
    if s.decoder.is_null() {
        return 0;
    }
    // SAFETY: `s.decoder` is the live decoder `on_sequence` created (not null, checked above);
    // `pic` is the parser's picture parameters, valid for this callback.
    let rc = unsafe { (s.api.decode_picture)(s.decoder, pic) };
    if rc != 0 {
        s.error.get_or_insert_with(|| format!("cuvidDecodePicture failed (CUresult {rc})"));
        return 0;
    }
    1
}

unsafe extern "C" fn on_display(user: *mut c_void, disp: *mut DispInfo) -> c_int {
    // SAFETY: as in `on_sequence`; a null `disp` means the end of the stream.
    let s = unsafe { &mut *(user as *mut State) };
    if disp.is_null() || s.decoder.is_null() {
        return 1;
    }
    // SAFETY: not null (checked above): the parser's display information, valid for this
    // callback, which only reads it.
    let d = unsafe { &*disp };
    let pts = d.timestamp as f64 / 1e6;
    if !s.sampler.keep(pts) {
        return 1;
    }
    if let Err(e) = crate::check_limit(&s.frames, &s.target) {
        s.error = Some(e);
        return 0;
    }
    // SAFETY: `s.decoder` is live (not null, checked above) and was created with output
    // surfaces of `s.surface` (`on_sequence`).
    match unsafe { copy_frame(s, d) } {
        Ok(()) => {
            let pixels = nv12_to_target(&s.host, s.surface, &s.target);
            s.frames.push(pts, &pixels);
            1
        }
        Err(e) => {
            s.error = Some(e);
            0
        }
    }
}

/// Map picture `d` and copy its NV12 surface (luma rows, then half as many chroma rows) to
/// `s.host`.
///
/// # Safety
/// `s.decoder` must be a live decoder whose output surfaces are `s.surface` in size.
unsafe fn copy_frame(s: &mut State, d: &DispInfo) -> Result<(), String> {
    // SAFETY: ProcParams is C integers and pointers, for which all-zero bytes are valid (no
    // output stream, no histogram).
    let mut proc: ProcParams = unsafe { std::mem::zeroed() };
    proc.progressive_frame = d.progressive_frame;
    proc.top_field_first = d.top_field_first;
    proc.unpaired_field = (d.repeat_first_field < 0) as c_int;
    let (mut dptr, mut pitch) = (0u64, 0 as c_uint);
    // SAFETY: a live decoder (the caller's promise), a picture index the parser handed over,
    // and out-parameters that live across the call.
    let rc = unsafe { (s.api.map)(s.decoder, d.picture_index, &mut dptr, &mut pitch, &mut proc) };
    if rc != 0 {
        return Err(format!("cuvidMapVideoFrame failed (CUresult {rc})"));
    }
    let (w, h) = s.surface;
    let rows = h + h / 2;
    s.host.resize(w * rows, 0);
    let copy = cu::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: dptr,
        srcArray: std::ptr::null_mut(),
        srcPitch: pitch as usize,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: s.host.as_mut_ptr() as *mut c_void,
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: w,
        WidthInBytes: w,
        Height: rows,
    };
    // SAFETY: the mapped surface holds `rows` rows of `pitch` bytes; the host buffer holds
    // `rows` rows of `w` bytes.
    let rc = unsafe { cu::cuMemcpy2D_v2(&copy) };
    // SAFETY: `dptr` was mapped on this decoder above and is unmapped once, whether or not the
    // copy succeeded.
    let unmap = unsafe { (s.api.unmap)(s.decoder, dptr) };
    if rc != cu::CUresult::CUDA_SUCCESS {
        return Err(format!("copying a frame to the host failed: {rc:?}"));
    }
    if unmap != 0 {
        return Err(format!("cuvidUnmapVideoFrame failed (CUresult {unmap})"));
    }
    Ok(())
}

/// NV12 (`surface` size) to the target's pixels, cropped to the target size, as FFmpeg's
/// libswscale converts unlabelled (BT.601, limited range) video: gray is luma stretched to
/// full range (`(Y - 16) × 255 / 219`, rounded), RGB by the BT.601 limited-range matrix.
pub(crate) fn nv12_to_target(nv12: &[u8], surface: (usize, usize), t: &Target) -> Vec<u8> {
    let (sw, sh) = surface;
    let mut out = Vec::with_capacity(t.width * t.height * t.channels);
    for y in 0..t.height {
        for x in 0..t.width {
            let luma = nv12[y * sw + x] as i32;
            if t.channels == 1 {
                out.push((((luma - 16) * 255 + 109).div_euclid(219)).clamp(0, 255) as u8);
                continue;
            }
            let c = sw * sh + (y / 2) * sw + (x / 2) * 2;
            let (u, v) = (nv12[c] as i32 - 128, nv12[c + 1] as i32 - 128);
            let yy = (luma - 16) * 298;
            let clamp = |v: i32| ((v + 128) >> 8).clamp(0, 255) as u8;
            out.push(clamp(yy + 409 * v));
            out.push(clamp(yy - 100 * u - 208 * v));
            out.push(clamp(yy + 516 * u));
        }
    }
    out
}

/// A surface size NVDEC accepts (even) that holds the target.
pub(crate) fn surface_for(t: &Target) -> (usize, usize) {
    ((t.width + 1) & !1, (t.height + 1) & !1)
}

impl Nvdec {
    /// Whether the driver and its video decoder are here (the `auto` device's test).
    pub fn available() -> bool {
        curator_gpu::CudaLib::Driver.present() && Api::load().is_ok() && CudaContext::new(0).is_ok()
    }

    pub fn new() -> Result<Nvdec, String> {
        curator_gpu::require(&[curator_gpu::CudaLib::Driver])?;
        let api = Api::load()?;
        let ctx = CudaContext::new(0).map_err(|e| format!("cannot open GPU 0: {e:?}"))?;
        Ok(Nvdec { api, ctx })
    }

    pub fn decode(&mut self, mut demuxer: Demuxer, target: &Target) -> Result<Frames, String> {
        self.ctx.bind_to_thread().map_err(|e| format!("cannot use GPU 0: {e:?}"))?;
        let probe = demuxer.probe.clone();
        let codec = codec_type(&probe.codec).ok_or_else(|| format!("codec {} cannot be decoded", probe.codec.name()))?;
        let config = match probe.codec {
            Codec::H264 | Codec::Hevc => Some(
                nal::parse_config(&probe.codec, &probe.config)
                    .ok_or_else(|| format!("malformed {} configuration record", probe.codec.name()))?,
            ),
            _ => None,
        };
        let mut state = State {
            api: &self.api,
            decoder: std::ptr::null_mut(),
            target: *target,
            surface: surface_for(target),
            sampler: Sampler::new(target.fps),
            frames: Frames::new(target.width, target.height, target.channels),
            host: Vec::new(),
            error: None,
        };
        let mut params = ParserParams {
            codec_type: codec,
            max_num_decode_surfaces: 1,
            clock_rate: 1_000_000,
            error_threshold: 100,
            max_display_delay: 2,
            reserved1: [0; 5],
            user_data: &mut state as *mut State as *mut c_void,
            sequence: Some(on_sequence),
            decode: Some(on_decode),
            display: Some(on_display),
            reserved2: [std::ptr::null_mut(); 7],
            ext_video_info: std::ptr::null_mut(),
        };
        let mut parser = std::ptr::null_mut();
        // SAFETY: `params` is fully initialised; its user data (`state`) outlives the parser,
        // which is destroyed below before `state` goes out of scope.
        let rc = unsafe { (self.api.create_parser)(&mut parser, &mut params) };
        if rc != 0 {
            return Err(format!("cuvidCreateVideoParser failed (CUresult {rc})"));
        }
        let mut buf = Vec::new();
        let mut first = true;
        let result = (|| -> Result<(), String> {
            while let Some(p) = demuxer.next_packet().map_err(|e| e.reason())? {
                buf.clear();
                match &config {
                    Some(c) => {
                        if first {
                            buf.extend_from_slice(&c.annexb);
                        }
                        nal::to_annexb(&p.data, c.length_size, &mut buf).ok_or("a frame's NAL lengths run past its end")?;
                    }
                    None => buf.extend_from_slice(&p.data),
                }
                first = false;
                let mut pkt = SourcePacket {
                    flags: PKT_TIMESTAMP,
                    payload_size: buf.len() as c_ulong,
                    payload: buf.as_ptr(),
                    timestamp: (p.pts * 1e6).round() as i64,
                };
                // SAFETY: the packet points into `buf`, alive for the call.
                let rc = unsafe { (self.api.parse)(parser, &mut pkt) };
                if let Some(e) = state.error.take() {
                    return Err(e);
                }
                if rc != 0 {
                    return Err(format!("cuvidParseVideoData failed (CUresult {rc})"));
                }
            }
            let mut eos = SourcePacket { flags: PKT_ENDOFSTREAM, payload_size: 0, payload: std::ptr::null(), timestamp: 0 };
            // SAFETY: an end-of-stream packet carries no payload.
            unsafe { (self.api.parse)(parser, &mut eos) };
            state.error.take().map_or(Ok(()), Err)
        })();
        // SAFETY: the parser and decoder were created above and are destroyed once.
        unsafe {
            (self.api.destroy_parser)(parser);
            if !state.decoder.is_null() {
                (self.api.destroy_decoder)(state.decoder);
            }
        }
        result?;
        Ok(state.frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nv12_converts_like_bt601_limited_range_and_crops_to_the_target() {
        let t = Target { fps: 0.0, width: 3, height: 1, channels: 3, max_frames: 10 };
        assert_eq!(surface_for(&t), (4, 2));
        // 4x2 luma (white, black, mid grey, -), then one chroma row of 2 (u, v) pairs.
        let nv12 = [235, 16, 126, 0, 0, 0, 0, 0, 128, 128, 128, 128];
        assert_eq!(nv12_to_target(&nv12, (4, 2), &t), [255, 255, 255, 0, 0, 0, 128, 128, 128]);
        // Gray is full range: limited-range white, black and Y 126 become 255, 0 and 128.
        let grey = Target { channels: 1, ..t };
        assert_eq!(nv12_to_target(&nv12, (4, 2), &grey), [255, 0, 128]);
        // Pure red in BT.601 limited range: Y 81, U 90, V 240.
        let red = [81, 81, 0, 0, 90, 240];
        let px = nv12_to_target(&red, (2, 2), &Target { width: 1, ..t });
        assert!(px[0] >= 253 && px[1] <= 2 && px[2] <= 2, "{px:?}");
    }
}
