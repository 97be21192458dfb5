//! Where clips begin and end: a fixed stride (NeMo Curator's `FixedStrideExtractorStage`) or
//! scene cuts found from the content distance between consecutive frames (PySceneDetect's
//! content detector: the mean absolute difference of hue, saturation and value, 0–255).

use crate::frames::Frames;

/// A clip of a video, in seconds from its start: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: f64,
    pub end: f64,
}

impl Span {
    pub fn len(&self) -> f64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
    /// The frames whose times lie in the span.
    pub fn frames(&self, times: &[f64]) -> std::ops::Range<usize> {
        let a = times.partition_point(|&t| t < self.start - 1e-9);
        let b = times.partition_point(|&t| t < self.end - 1e-9);
        a..b.max(a)
    }
}

/// A file name (without extension) from a clip or window id: every character but ASCII
/// letters, digits and `._-` becomes `_`, leading dots dropped (`dir/a.mp4:3` → `dir_a.mp4_3`).
pub fn file_stem(id: &str) -> String {
    let safe: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    safe.trim_start_matches('.').to_string()
}

/// Clips of `clip_len_s` every `stride_s` seconds; the last one ends with the video and is kept
/// only if it lasts at least `min_len_s`.
pub fn fixed_stride(duration_s: f64, clip_len_s: f64, stride_s: f64, min_len_s: f64) -> Vec<Span> {
    let mut out = Vec::new();
    if !(clip_len_s > 0.0 && stride_s > 0.0) {
        return out;
    }
    let mut k = 0u64;
    loop {
        // Multiply rather than accumulate, so boundaries stay exact multiples of the stride.
        let start = k as f64 * stride_s;
        if start >= duration_s - 1e-9 {
            break;
        }
        let end = (start + clip_len_s).min(duration_s);
        if end - start >= min_len_s - 1e-9 {
            out.push(Span { start, end });
        }
        k += 1;
    }
    out
}

/// OpenCV-style HSV of an RGB pixel: hue 0–179, saturation and value 0–255.
fn hsv(r: u8, g: u8, b: u8) -> [i32; 3] {
    let (r, g, b) = (r as i32, g as i32, b as i32);
    let v = r.max(g).max(b);
    let min = r.min(g).min(b);
    let d = v - min;
    let s = if v == 0 { 0 } else { (255 * d + v / 2) / v };
    let h = if d == 0 {
        0
    } else if v == r {
        (30 * (g - b) / d).rem_euclid(180)
    } else if v == g {
        60 + 30 * (b - r) / d
    } else {
        120 + 30 * (r - g) / d
    };
    [h, s, v]
}

/// The content distance between each frame and the one before it (`scores[0]` is 0).
pub fn content_scores(f: &Frames) -> Vec<f64> {
    let pixels = f.width * f.height;
    let mut prev: Vec<[i32; 3]> = Vec::new();
    let mut out = Vec::with_capacity(f.len());
    for i in 0..f.len() {
        let frame = f.frame(i);
        let cur: Vec<[i32; 3]> = match f.channels {
            3 => frame.chunks_exact(3).map(|p| hsv(p[0], p[1], p[2])).collect(),
            _ => (0..pixels).map(|p| [0, 0, frame[p * f.channels] as i32]).collect(),
        };
        let score = if prev.is_empty() || pixels == 0 {
            0.0
        } else {
            let sum: i64 = cur.iter().zip(&prev).map(|(a, b)| (0..3).map(|c| (a[c] - b[c]).abs() as i64).sum::<i64>()).sum();
            let planes = if f.channels == 3 { 3 } else { 1 };
            sum as f64 / (pixels * planes) as f64
        };
        out.push(score);
        prev = cur;
    }
    out
}

/// Frames that start a new scene: content distance at least `threshold`, and at least
/// `min_scene_frames` after the previous cut.
pub fn scene_cuts(scores: &[f64], threshold: f64, min_scene_frames: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut last = 0usize;
    for (i, &s) in scores.iter().enumerate().skip(1) {
        if s >= threshold && i - last >= min_scene_frames.max(1) {
            cuts.push(i);
            last = i;
        }
    }
    cuts
}

/// How a scene longer than the longest clip becomes clips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongScenes {
    /// Keep its first `max_len_s`.
    Truncate,
    /// Cut it into consecutive clips of `max_len_s` (the last kept if at least `min_len_s`).
    Stride,
}

/// Clips from scene boundaries: scenes are `[times[cut k], times[cut k+1])`, the first from 0
/// and the last to `duration_s`; each is shortened by `crop_s` at both ends, dropped when
/// shorter than `min_len_s`, and cut to `max_len_s` (0: no limit) as `long` says.
pub fn scenes_to_clips(
    cuts: &[usize],
    times: &[f64],
    duration_s: f64,
    crop_s: f64,
    min_len_s: f64,
    max_len_s: f64,
    long: LongScenes,
) -> Vec<Span> {
    let mut bounds = vec![0.0];
    bounds.extend(cuts.iter().filter_map(|&c| times.get(c).copied()));
    bounds.push(duration_s);
    let mut out = Vec::new();
    for w in bounds.windows(2) {
        let scene = Span { start: w[0] + crop_s, end: w[1] - crop_s };
        if scene.len() < min_len_s - 1e-9 || scene.is_empty() {
            continue;
        }
        if max_len_s <= 0.0 || scene.len() <= max_len_s + 1e-9 {
            out.push(scene);
            continue;
        }
        match long {
            LongScenes::Truncate => out.push(Span { start: scene.start, end: scene.start + max_len_s }),
            LongScenes::Stride => out.extend(
                fixed_stride(scene.len(), max_len_s, max_len_s, min_len_s)
                    .into_iter()
                    .map(|s| Span { start: scene.start + s.start, end: scene.start + s.end }),
            ),
        }
    }
    out
}

/// Scenes as frame ranges `[start, end)` between shot transitions, as NeMo Curator's TransNetV2
/// stage finds them (`_get_scenes`): a scene ends at the first frame of a transition and the next
/// begins after its last frame; the frames before the first transition are not a scene of
/// their own unless a later one follows (as NeMo). The trailing scene ends at the last frame's
/// index (NeMo's own bound, kept so clips match). With no transition at all, the whole video is
/// one scene when `entire_video` is set, else there are none.
pub fn transition_scenes(transition: &[bool], entire_video: bool) -> Vec<(usize, usize)> {
    let mut scenes = Vec::new();
    let (mut prev, mut start) = (false, 0);
    for (i, &t) in transition.iter().enumerate() {
        if prev && !t {
            start = i;
        }
        if !prev && t && i != 0 {
            scenes.push((start, i));
        }
        prev = t;
    }
    if transition.last() == Some(&false) && !scenes.is_empty() {
        scenes.push((start, transition.len() - 1));
    }
    if scenes.is_empty() && entire_video {
        scenes.push((0, transition.len()));
    }
    scenes
}

/// How scenes become clips, in frames (NeMo's `_get_filtered_scenes`; `None` where NeMo's
/// setting is unset or zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SceneShape {
    pub min_frames: Option<usize>,
    pub max_frames: Option<usize>,
    pub long: LongScenes,
    pub crop_frames: Option<usize>,
}

/// Scenes shaped into clips as NeMo Curator's TransNetV2 stage does: scenes over `max_frames`
/// truncated or cut into consecutive spans (a last span under `min_frames` dropped), then
/// `crop_frames` taken off both ends (spans left empty dropped), then spans under `min_frames`
/// dropped.
pub fn shape_scenes(scenes: &[(usize, usize)], shape: SceneShape) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = match shape.max_frames {
        None => scenes.to_vec(),
        Some(max) => match shape.long {
            LongScenes::Truncate => scenes.iter().map(|&(s, e)| (s, e.min(s + max))).collect(),
            LongScenes::Stride => {
                let mut spans = Vec::new();
                for &(start, end) in scenes {
                    let mut s = start;
                    while s < end {
                        let e = (s + max).min(end);
                        if shape.min_frames.is_some_and(|m| m > 0 && e - s < m) && e == end {
                            break;
                        }
                        spans.push((s, e));
                        // A zero `max` would never move on: NeMo loops forever there; stop.
                        if e == s {
                            break;
                        }
                        s = e;
                    }
                }
                spans
            }
        },
    };
    if let Some(crop) = shape.crop_frames {
        out = out.into_iter().filter(|&(s, e)| e > s + 2 * crop).map(|(s, e)| (s + crop, e - crop)).collect();
    }
    if let Some(min) = shape.min_frames {
        out.retain(|&(s, e)| e.saturating_sub(s) >= min);
    }
    out
}

/// The rows a clip splitter answers (`clip_split`, `transnetv2_split`): one per clip, `id`
/// (`<video id>:<clip index>`), `text` (the video's path), `video_id`, `clip_index`, `start_s`,
/// `end_s`, `num_frames` and, when kept, the clip's own frames (the frame columns).
pub struct ClipRows {
    keep_frames: bool,
    id: Vec<String>,
    text: Vec<String>,
    video_id: Vec<String>,
    index: Vec<i64>,
    start: Vec<f64>,
    end: Vec<f64>,
    count: Vec<i64>,
    frames: Vec<Frames>,
}

impl ClipRows {
    pub fn new(keep_frames: bool) -> ClipRows {
        ClipRows {
            keep_frames,
            id: Vec::new(),
            text: Vec::new(),
            video_id: Vec::new(),
            index: Vec::new(),
            start: Vec::new(),
            end: Vec::new(),
            count: Vec::new(),
            frames: Vec::new(),
        }
    }

    /// Clip `k` of `video` (at `path`): `[start_s, end_s)`, its frames `range` of `f`.
    #[allow(clippy::too_many_arguments)]
    pub fn push(&mut self, video: &str, path: &str, k: usize, start_s: f64, end_s: f64, f: &Frames, range: std::ops::Range<usize>) {
        self.id.push(format!("{video}:{k}"));
        self.text.push(path.to_string());
        self.video_id.push(video.to_string());
        self.index.push(k as i64);
        self.start.push(start_s);
        self.end.push(end_s);
        self.count.push(range.len() as i64);
        self.frames.push(if self.keep_frames { f.slice(range) } else { Frames::new(f.width, f.height, f.channels) });
    }

    /// The rows as a batch.
    pub fn into_batch(self) -> curator_sdk::Batch {
        use curator_sdk::Column;
        let mut columns = vec![
            Column::utf8("id", self.id.iter().map(String::as_str)),
            Column::utf8("text", self.text.iter().map(String::as_str)),
            Column::utf8("video_id", self.video_id.iter().map(String::as_str)),
            Column::int64("clip_index", &self.index),
            Column::float64("start_s", &self.start),
            Column::float64("end_s", &self.end),
            Column::int64("num_frames", &self.count),
        ];
        if self.keep_frames {
            columns.extend(crate::frames::to_columns(&self.frames));
        }
        curator_sdk::Batch { num_rows: self.id.len() as u32, columns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_stride_boundaries_are_exact() {
        let s = fixed_stride(10.5, 3.0, 3.0, 1.0);
        assert_eq!(s.iter().map(|s| (s.start, s.end)).collect::<Vec<_>>(), [(0.0, 3.0), (3.0, 6.0), (6.0, 9.0), (9.0, 10.5)]);
        // The short tail is dropped below the minimum; overlapping strides work too.
        assert_eq!(fixed_stride(10.5, 3.0, 3.0, 2.0).len(), 3);
        assert_eq!(fixed_stride(4.0, 2.0, 1.0, 2.0).iter().map(|s| s.start).collect::<Vec<_>>(), [0.0, 1.0, 2.0]);
        assert!(fixed_stride(4.0, 0.0, 1.0, 0.0).is_empty());
    }

    fn solid(frames: &mut Frames, t: f64, rgb: [u8; 3]) {
        let px: Vec<u8> = (0..frames.width * frames.height).flat_map(|_| rgb).collect();
        frames.push(t, &px);
    }

    #[test]
    fn a_colour_change_is_a_cut_and_clips_follow_scenes() {
        let mut f = Frames::new(4, 4, 3);
        for i in 0..30 {
            let colour = if i < 12 {
                [200, 30, 30]
            } else if i < 20 {
                [30, 120, 30]
            } else {
                [30, 30, 200]
            };
            solid(&mut f, i as f64 / 10.0, colour);
        }
        let scores = content_scores(&f);
        assert_eq!(scene_cuts(&scores, 27.0, 5), [12, 20]);
        // Too close together: the second cut is refused.
        assert_eq!(scene_cuts(&scores, 27.0, 10), [12]);
        let clips = scenes_to_clips(&[12, 20], &f.times, 3.0, 0.0, 0.5, 0.0, LongScenes::Truncate);
        assert_eq!(clips.iter().map(|s| (s.start, s.end)).collect::<Vec<_>>(), [(0.0, 1.2), (1.2, 2.0), (2.0, 3.0)]);
        assert_eq!(clips[1].frames(&f.times), 12..20);
        let long = scenes_to_clips(&[], &f.times, 3.0, 0.0, 0.5, 1.0, LongScenes::Stride);
        assert_eq!(long.len(), 3);
        let cut = scenes_to_clips(&[], &f.times, 3.0, 0.0, 0.5, 1.0, LongScenes::Truncate);
        assert_eq!(cut.iter().map(|s| (s.start, s.end)).collect::<Vec<_>>(), [(0.0, 1.0)]);
    }

    #[test]
    fn hsv_matches_opencv_for_primaries() {
        assert_eq!(hsv(255, 0, 0), [0, 255, 255]);
        assert_eq!(hsv(0, 255, 0), [60, 255, 255]);
        assert_eq!(hsv(0, 0, 255), [120, 255, 255]);
        assert_eq!(hsv(128, 128, 128), [0, 0, 128]);
    }
    #[test]
    fn transition_scenes_follow_nemo() {
        let flags = |s: &str| s.chars().map(|c| c == '1').collect::<Vec<_>>();
        // Transitions at 3 and 7..8: scenes [0, 3), [4, 7), [9, 11) (the last ends at index 11).
        assert_eq!(transition_scenes(&flags("000100011000"), true), [(0, 3), (4, 7), (9, 11)]);
        // A transition on the first frame does not close a scene; one on the last frame does.
        assert_eq!(transition_scenes(&flags("1000010"), false), [(1, 5), (6, 6)]);
        assert_eq!(transition_scenes(&flags("0000001"), false), [(0, 6)]);
        // No transition: the whole video, or nothing.
        assert_eq!(transition_scenes(&flags("0000"), true), [(0, 4)]);
        assert!(transition_scenes(&flags("0000"), false).is_empty());
        assert_eq!(transition_scenes(&[], true), [(0, 0)]);
    }

    #[test]
    fn scenes_are_shaped_as_nemo_shapes_them() {
        let shape = SceneShape { min_frames: Some(50), max_frames: Some(250), long: LongScenes::Stride, crop_frames: Some(12) };
        // 600 frames: 250 + 250 + 100; each cropped by 12 at both ends.
        assert_eq!(shape_scenes(&[(0, 600)], shape), [(12, 238), (262, 488), (512, 588)]);
        // The last stride span under the minimum is dropped before the crop.
        assert_eq!(shape_scenes(&[(0, 540)], shape), [(12, 238), (262, 488)]);
        // Cropping can empty a scene; the minimum applies after the crop.
        assert_eq!(shape_scenes(&[(0, 20), (100, 160), (200, 280)], shape), [(212, 268)]);
        let truncate = SceneShape { long: LongScenes::Truncate, crop_frames: None, ..shape };
        assert_eq!(shape_scenes(&[(0, 600), (600, 640)], truncate), [(0, 250)]);
        let nothing = SceneShape { min_frames: None, max_frames: None, long: LongScenes::Stride, crop_frames: None };
        assert_eq!(shape_scenes(&[(5, 5), (6, 9)], nothing), [(5, 5), (6, 9)]);
    }
}
