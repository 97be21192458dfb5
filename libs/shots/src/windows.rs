//! A video's frames as the network's windows: 100 frames moved by 50, each window's middle
//! 50 outputs kept (25 frames of context on either side).

/// Frames per window.
pub const WINDOW: usize = 100;
/// Frames between window starts (and outputs kept per window).
pub const STEP: usize = 50;
/// Context frames before the first kept output of a window.
pub const CONTEXT: usize = 25;

/// How the ends of a video are windowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windows {
    /// As published (`predict_frames` of TransNetV2's reference code): 25 copies of the first
    /// frame before the video and copies of the last after it, so every window is 100 frames.
    Published,
    /// As NeMo Curator's `TransNetV2ClipExtractionStage` (`_get_batches`): the start padded
    /// the same way, the end never, so the last window is shorter (its last frames see less
    /// context than published).
    Nemo,
}

/// One window: the video frame at each of its positions, and how many of its outputs from
/// position [`CONTEXT`] on are the video's (the rest are padding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub frames: Vec<usize>,
    pub keep: usize,
}

/// The windows of a video of `n` frames; window `k`'s kept outputs are frames `50k..`.
pub fn plan(n: usize, mode: Windows) -> Vec<Window> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        // Position p of the window starting at video frame `start` shows frame start + p − 25,
        // clamped to the video (the copies of the first and last frame).
        let len = match mode {
            Windows::Published => WINDOW,
            Windows::Nemo => WINDOW.min(n + CONTEXT - start),
        };
        let frames = (0..len).map(|p| (start + p).saturating_sub(CONTEXT).min(n - 1)).collect();
        out.push(Window { frames, keep: STEP.min(n - start) });
        start += STEP;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_windows_repeat_the_end_frames() {
        // 130 frames: windows at 0, 50, 100; the padded sequence is 25 + 130 + 45 = 200 frames.
        let w = plan(130, Windows::Published);
        assert_eq!(w.len(), 3);
        assert!(w.iter().all(|w| w.frames.len() == WINDOW));
        assert_eq!(&w[0].frames[..27], &[[0; 26].as_slice(), &[1]].concat()[..]);
        assert_eq!(w[1].frames[0], 25);
        assert_eq!(w[2].frames[..3], [75, 76, 77]);
        assert_eq!(w[2].frames[54..56], [129, 129]);
        assert_eq!(*w[2].frames.last().unwrap(), 129);
        assert_eq!(w.iter().map(|w| w.keep).collect::<Vec<_>>(), [50, 50, 30]);
    }

    #[test]
    fn nemo_windows_end_with_the_video() {
        let w = plan(130, Windows::Nemo);
        assert_eq!(w.iter().map(|w| w.frames.len()).collect::<Vec<_>>(), [100, 100, 55]);
        assert_eq!(w[2].frames, (75..130).collect::<Vec<_>>());
        assert_eq!(w.iter().map(|w| w.keep).collect::<Vec<_>>(), [50, 50, 30]);
        // Whole windows where the video is a multiple of 50 frames long... except the last,
        // which has 25 frames of context after its kept outputs only when the video has them.
        let w = plan(100, Windows::Nemo);
        assert_eq!(w.iter().map(|w| w.frames.len()).collect::<Vec<_>>(), [100, 75]);
    }

    #[test]
    fn short_and_empty_videos() {
        assert!(plan(0, Windows::Published).is_empty());
        let w = plan(3, Windows::Nemo);
        assert_eq!(w, [Window { frames: [vec![0; 25], vec![0, 1, 2]].concat(), keep: 3 }]);
        let w = plan(3, Windows::Published);
        assert_eq!(w[0].frames.len(), WINDOW);
        assert_eq!(w[0].frames[27..], [2; 73]);
    }
}
