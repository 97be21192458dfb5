//! The CPU decoder: FFmpeg (`curator-video-ffmpeg`) fed by our demuxer, each kept frame scaled
//! to the target size and pixel format by libswscale's area filter.

use curator_video::Demuxer;
use curator_video::frames::{Frames, Sampler, Target};
use curator_video_ffmpeg::{Scaler, decode as ff_decode, ff};

pub fn decode(demuxer: Demuxer, target: &Target, threads: usize) -> Result<Frames, String> {
    let pixel = if target.channels == 1 { ff::format::Pixel::GRAY8 } else { ff::format::Pixel::RGB24 };
    let mut scaler = Scaler::new(pixel, target.width as u32, target.height as u32);
    let mut sampler = Sampler::new(target.fps);
    let mut frames = Frames::new(target.width, target.height, target.channels);
    ff_decode(demuxer, threads, |frame, pts| {
        if sampler.keep(pts) {
            crate::check_limit(&frames, target)?;
            let pixels = scaler.packed(frame, target.channels)?;
            frames.push(pts, &pixels);
        }
        Ok(true)
    })?;
    Ok(frames)
}
