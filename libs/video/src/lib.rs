//! Video curation's pure parts, shared by the host (the `video` source probes files) and the
//! video stages (`video_decode`, `clip_split`, `motion_filter`, `clip_writer`):
//!
//! - [`container`]: what a file holds (codec, size, frame rate, duration), read from its
//!   container without decoding (MP4/MOV in [`container::mp4`], Matroska/WebM in
//!   [`container::mkv`]), and its compressed frames in decode order ([`container::Demuxer`]);
//!   a file that is not a video, is cut short or holds a codec we cannot decode is an error
//!   that names it and says why.
//! - [`nal`]: H.264/HEVC framing: length-prefixed samples to Annex B and parameter sets from
//!   `avcC`/`hvcC` (what a hardware decoder's parser wants).
//! - [`frames`]: decoded, downscaled frames as columns of a batch.
//! - [`clips`]: clip boundaries: fixed stride (NeMo Curator's `FixedStrideExtractorStage`) and
//!   scene cuts from content distance between consecutive frames.
//! - [`motion`]: motion scores of a clip from frame differences.
//! - [`windows`]: what a captioning model is shown of a clip (NeMo's caption windows, frames
//!   sampled in each, Qwen-VL's frame size).

pub mod clips;
pub mod container;
pub mod frames;
pub mod motion;
pub mod nal;
pub mod windows;

pub use container::{Codec, Demuxer, Packet, Probe, VideoError, probe};
