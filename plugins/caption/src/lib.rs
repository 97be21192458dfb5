//! `caption`: NeMo Curator's `CaptionPreparationStage` and `CaptionGenerationStage` over a
//! served vision-language model (the pipeline's `service:`, e.g. `vllm serve
//! Qwen/Qwen2.5-VL-7B-Instruct`). Each clip's frames (from `video_decode` → `clip_split` or
//! `transnetv2_split`) are cut into NeMo's windows (`window_size` frames, a remainder of at
//! least `remainder_threshold` its own window), each window sampled at `sampling_fps` as
//! NeMo samples it, each frame sized as Qwen-VL's processor sizes it and sent as JPEG: one
//! video part (vLLM's `data:video/jpeg;base64,F1,F2,…`, what NeMo's in-process vLLM gets as
//! a video) or one image part per frame (`frames_as: images`, any OpenAI-compatible server),
//! then NeMo's prompt. The answer is the window's caption.
//!
//! The output has one row per window (NeMo keeps windows inside the clip): the clip's fields,
//! `window_index`, `window_start_frame` / `window_end_frame` (the clip's frames, inclusive),
//! `window_start_s` / `window_end_s`, the caption and the usage; the row's frames are the
//! window's (for `clip_preview`), or none (`keep_frames: false`). A window whose request keeps
//! failing gets the reason in `_error`: the host dead-letters it and keeps the rest. A clip too
//! short for a window (NeMo: fewer than 4 frames) is dropped and counted in the log, as
//! `video_embedder` drops one too short to embed (`drop_short: false` keeps it, uncaptioned).

use base64::Engine as _;
use curator_image::Rgb8;
use curator_llm::presets::{CAPTION_PROMPTS, caption_prompt};
use curator_llm::{Chat, Client, Message, Part, Url};
use curator_sdk::prelude::*;
use curator_video::frames::{self, Frames};
use curator_video::windows::{self, MIN_WINDOW_FRAMES, Window};
use rayon::prelude::*;

/// Captions clip windows with a served vision-language model.
#[stage(
    name = "caption",
    native,
    cpus = 2.0,
    memory_mb = 4096,
    inputs = ["*"],
    outputs = [
        "window_index",
        "window_start_frame",
        "window_end_frame",
        "window_start_s",
        "window_end_s",
        "caption",
        "llm_prompt_tokens",
        "llm_completion_tokens"
    ],
    sums = ["llm_prompt_tokens", "llm_completion_tokens"],
    batch_size = 16
)]
pub struct Caption {
    /// NeMo's prompt for the window: `default`, `av` (a car's camera) or `av-surveillance`.
    #[param(default = "default", one_of = ["default", "av", "av-surveillance"])]
    pub prompt_variant: String,
    /// A prompt of your own instead (NeMo's `prompt_text`).
    #[param(default = "")]
    pub prompt_text: String,
    /// Frames per second sampled from each window (NeMo's `sampling_fps`).
    #[param(default = 2.0, min = 0.001)]
    pub sampling_fps: f64,
    /// Frames a window spans, counted in the frames the clip carries (NeMo counts the
    /// source's frames: decode with `fps: 0` for its windows).
    #[param(default = 256, min = 4)]
    pub window_size: usize,
    /// A remainder of at least this many frames is a window of its own; a shorter one is
    /// added to the last window.
    #[param(default = 128, min = 0)]
    pub remainder_threshold: usize,
    /// `video`: the window's frames as one video part (vLLM's JPEG frame list; the model sees
    /// a video, as NeMo's in-process vLLM gives it); `images`: one image part per frame.
    #[param(default = "video", one_of = ["video", "images"])]
    pub frames_as: String,
    /// Frame sides are multiples of this (Qwen2/2.5-VL's 28; Qwen3-VL's 32).
    #[param(default = 28, min = 1)]
    pub resize_factor: usize,
    /// Fewest pixels a frame is sent with (Qwen-VL's video processor: 128 × 28 × 28).
    #[param(default = 100352, min = 1)]
    pub min_pixels: usize,
    /// Most pixels a frame is sent with (Qwen-VL's video processor: 768 × 28 × 28).
    #[param(default = 602112, min = 1)]
    pub max_pixels: usize,
    /// JPEG quality of the frames sent.
    #[param(default = 90, min = 1, max = 100)]
    pub jpeg_quality: u32,
    /// The field the caption goes to.
    #[param(default = "caption")]
    pub caption_field: String,
    /// Keep each window's frames on its row (what `clip_preview` reads); false drops them.
    #[param(default = true)]
    pub keep_frames: bool,
    /// Drop clips too short for a window (fewer than 4 frames; NeMo captions none of them),
    /// counted in the log; false: keep each as one row with `window_index` −1 and no caption.
    #[param(default = true)]
    pub drop_short: bool,
    /// Most tokens a caption may have (NeMo's `max_output_tokens`).
    #[param(default = 512, min = 1)]
    pub max_output_tokens: u32,
    /// Sampling temperature (NeMo's 0.1; negative: the server's default).
    #[param(default = 0.1)]
    pub temperature: f64,
    /// Nucleus sampling (NeMo's 0.001; negative: the server's default).
    #[param(default = 0.001)]
    pub top_p: f64,
    /// vLLM's repetition penalty (NeMo's 1.05; negative: not sent, for servers without it).
    #[param(default = 1.05)]
    pub repetition_penalty: f64,
    /// Sampling seed (negative: none).
    #[param(default = -1)]
    pub seed: i64,
    /// Seconds one request may take.
    #[param(default = 600.0, min = 1.0)]
    pub request_timeout_s: f64,
    /// Retries of a request after a 429, a 5xx or a time-out.
    #[param(default = 5, min = 0)]
    pub max_retries: u32,
    /// Seconds requests wait for a service none of whose replicas answers (one restarting).
    #[param(default = 900.0, min = 0.0)]
    pub wait_for_server_s: f64,
    /// Requests in flight at first (NeMo's `caption_batch_size`); the limit then follows the
    /// server's latency.
    #[param(default = 16, min = 1)]
    pub initial_in_flight: usize,
    /// Requests in flight at most, per worker.
    #[param(default = 128, min = 1)]
    pub max_in_flight: usize,
    /// Keep answers in the host's cache directory, so a rerun does not ask again.
    #[param(default = true)]
    pub cache: bool,
    /// Add `llm_prompt_tokens` and `llm_completion_tokens`.
    #[param(default = true)]
    pub usage_fields: bool,
    #[state]
    prompt: String,
    #[state]
    client: Option<Client>,
}

/// One row of the output: a window of a clip, or a clip too short for one.
struct Job {
    row: usize,
    index: i64,
    window: Option<Window>,
    /// The clip's frames the window shows (none for a short clip), or why they cannot be.
    picked: Result<Vec<usize>, String>,
}

impl Caption {
    fn settings(&self) -> curator_llm::stage::Settings {
        curator_llm::stage::Settings {
            request_timeout_s: self.request_timeout_s,
            max_retries: self.max_retries,
            wait_for_server_s: self.wait_for_server_s,
            initial_in_flight: self.initial_in_flight,
            max_in_flight: self.max_in_flight,
            cache: self.cache,
        }
    }

    /// The window's frames as the model gets them: sized as Qwen-VL's processor sizes them,
    /// JPEG, base64.
    fn encode(&self, clip: &Frames, picked: &[usize]) -> Result<Vec<String>, String> {
        let (h, w) = windows::model_size(clip.height, clip.width, self.resize_factor, self.min_pixels, self.max_pixels)?;
        picked
            .iter()
            .map(|&i| {
                let frame = Rgb8 { width: clip.width, height: clip.height, data: clip.rgb(i) };
                let sized = curator_image::resize::bicubic_resize(&frame, w, h);
                let jpeg = curator_image::encode_jpeg(&sized, self.jpeg_quality as u8).map_err(|e| e.to_string())?;
                Ok(base64::engine::general_purpose::STANDARD.encode(jpeg))
            })
            .collect()
    }

    fn chat(&self, jpegs: &[String]) -> Chat {
        let mut parts = if self.frames_as == "images" {
            jpegs.iter().map(|j| Part::ImageUrl { image_url: Url { url: format!("data:image/jpeg;base64,{j}") } }).collect()
        } else {
            vec![Part::VideoUrl { video_url: Url { url: format!("data:video/jpeg;base64,{}", jpegs.join(",")) } }]
        };
        parts.push(Part::Text { text: self.prompt.clone() });
        let mut extra = serde_json::Map::new();
        if self.repetition_penalty >= 0.0 {
            extra.insert("repetition_penalty".into(), self.repetition_penalty.into());
        }
        Chat {
            messages: vec![Message::parts("user", parts)],
            max_tokens: Some(self.max_output_tokens),
            temperature: (self.temperature >= 0.0).then_some(self.temperature),
            top_p: (self.top_p >= 0.0).then_some(self.top_p),
            seed: u64::try_from(self.seed).ok(),
            extra,
        }
    }

    /// Every window of every clip, and the clips too short for one (a row each with
    /// `drop_short: false`); the number of those.
    fn plan(&self, clips: &[Frames]) -> (Vec<Job>, usize) {
        let (mut jobs, mut short) = (Vec::new(), 0);
        for (row, clip) in clips.iter().enumerate() {
            let fps = windows::frame_rate(&clip.times);
            let ws = windows::windows(clip.len(), self.window_size, self.remainder_threshold);
            if ws.is_empty() {
                short += 1;
                if !self.drop_short {
                    jobs.push(Job { row, index: -1, window: None, picked: Ok(Vec::new()) });
                }
            }
            for (k, w) in ws.into_iter().enumerate() {
                jobs.push(Job { row, index: k as i64, window: Some(w), picked: windows::sample(w, self.sampling_fps, fps) });
            }
        }
        (jobs, short)
    }
}

impl Stage for Caption {
    fn init(&mut self) -> Result<(), StageError> {
        self.prompt = if self.prompt_text.is_empty() {
            caption_prompt(&self.prompt_variant)
                .ok_or_else(|| {
                    let names: Vec<&str> = CAPTION_PROMPTS.iter().map(|p| p.0).collect();
                    StageError::InvalidParams(format!("prompt_variant: {:?} is not one of {}", self.prompt_variant, names.join(", ")))
                })?
                .to_string()
        } else {
            self.prompt_text.clone()
        };
        if self.caption_field.is_empty() || self.caption_field.starts_with('_') {
            return Err(StageError::InvalidParams(format!("caption_field: {:?} is not a field a stage may write", self.caption_field)));
        }
        if self.min_pixels > self.max_pixels {
            return Err(StageError::InvalidParams(format!("min_pixels {} is over max_pixels {}", self.min_pixels, self.max_pixels)));
        }
        self.client = curator_llm::stage::connect("caption", &self.settings())?;
        Ok(())
    }

    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let client = self.client.as_ref().ok_or_else(|| StageError::Failed("caption: not set up".into()))?;
        let clips = frames::from_batch(&batch)?;
        let (jobs, short) = self.plan(&clips);
        if short > 0 {
            let what = if self.drop_short { "dropped" } else { "kept without a caption" };
            log(Level::Warn, &format!("caption: {short} clip(s) of fewer than {MIN_WINDOW_FRAMES} frames have no window: {what}"));
        }
        let encoded: Vec<Result<Vec<String>, String>> = jobs
            .par_iter()
            .map(|j| match (&j.window, &j.picked) {
                (None, _) => Ok(Vec::new()),
                (Some(_), Ok(picked)) => self.encode(&clips[j.row], picked),
                (Some(_), Err(e)) => Err(e.clone()),
            })
            .collect();
        // A short clip's row (no window) asks nothing.
        let asked: Vec<usize> = (0..jobs.len()).filter(|&k| jobs[k].window.is_some() && encoded[k].is_ok()).collect();
        let chats: Vec<Chat> = asked.iter().map(|&k| self.chat(encoded[k].as_deref().unwrap_or_default())).collect();
        // The frames live on in the requests only: free the JPEGs before the (long) wait.
        let unencoded: Vec<Option<String>> = encoded.into_iter().map(Result::err).collect();
        let mut replies = client.chat_all(&chats).into_iter();
        drop(chats);

        let n = jobs.len();
        let mut captions: Vec<String> = vec![String::new(); n];
        let mut errors: Vec<Option<String>> = vec![None; n];
        let (mut prompt_tokens, mut completion_tokens) = (vec![0i64; n], vec![0i64; n]);
        for (k, why) in unencoded.into_iter().enumerate() {
            match why {
                Some(why) => errors[k] = Some(why),
                None if jobs[k].window.is_none() => {}
                None => match replies.next() {
                    Some(Ok(r)) => {
                        captions[k] = r.text.trim().to_string();
                        prompt_tokens[k] = r.prompt_tokens as i64;
                        completion_tokens[k] = r.completion_tokens as i64;
                    }
                    Some(Err(err)) => errors[k] = Some(err.to_string()),
                    None => errors[k] = Some("caption: no answer for the window".into()),
                },
            }
        }

        // The clip's fields on each of its windows' rows; its frames cut to the window's.
        let rows: Vec<u32> = jobs.iter().map(|j| j.row as u32).collect();
        let fields = Batch {
            num_rows: batch.num_rows,
            columns: batch.columns.into_iter().filter(|c| !frames::COLUMNS.contains(&c.name.as_str())).collect(),
        };
        let mut out = fields.take(&rows)?;
        if self.keep_frames {
            let cut: Vec<Frames> = jobs
                .iter()
                .map(|j| match j.window {
                    Some(w) => clips[j.row].slice(w.start..w.end + 1),
                    None => Frames::new(clips[j.row].width, clips[j.row].height, clips[j.row].channels),
                })
                .collect();
            out.columns.extend(frames::to_columns(&cut));
        }
        let time = |j: &Job, at: fn(&Window) -> usize| j.window.and_then(|w| clips[j.row].times.get(at(&w)).copied()).unwrap_or(f64::NAN);
        let frame = |j: &Job, at: fn(&Window) -> usize| j.window.map_or(-1, |w| at(&w) as i64);
        let indices: Vec<i64> = jobs.iter().map(|j| j.index).collect();
        let starts: Vec<i64> = jobs.iter().map(|j| frame(j, |w| w.start)).collect();
        let ends: Vec<i64> = jobs.iter().map(|j| frame(j, |w| w.end)).collect();
        let start_s: Vec<f64> = jobs.iter().map(|j| time(j, |w| w.start)).collect();
        let end_s: Vec<f64> = jobs.iter().map(|j| time(j, |w| w.end)).collect();
        out.columns.extend([
            Column::int64("window_index", &indices),
            Column::int64("window_start_frame", &starts),
            Column::int64("window_end_frame", &ends),
            Column::float64("window_start_s", &start_s),
            Column::float64("window_end_s", &end_s),
            Column::utf8(&self.caption_field, captions.iter().map(String::as_str)),
        ]);
        if self.usage_fields {
            out.columns.push(Column::int64("llm_prompt_tokens", &prompt_tokens));
            out.columns.push(Column::int64("llm_completion_tokens", &completion_tokens));
        }
        out.columns.extend(Column::row_errors(&errors));
        Ok(Output::Batch(out))
    }
}

impl Drop for Caption {
    /// What this worker's client did, for the run's log.
    fn drop(&mut self) {
        if let Some(c) = &self.client {
            curator_llm::stage::log_stats("caption", c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clip(frames: usize, fps: f64, w: usize, h: usize) -> Frames {
        let mut f = Frames::new(w, h, 3);
        for k in 0..frames {
            f.push(k as f64 / fps, &vec![(k % 256) as u8; w * h * 3]);
        }
        f
    }

    fn stage() -> Caption {
        Caption {
            prompt_variant: "default".into(),
            prompt_text: String::new(),
            sampling_fps: 2.0,
            window_size: 256,
            remainder_threshold: 128,
            frames_as: "video".into(),
            resize_factor: 28,
            min_pixels: 100352,
            max_pixels: 602112,
            jpeg_quality: 90,
            caption_field: "caption".into(),
            keep_frames: true,
            drop_short: true,
            max_output_tokens: 512,
            temperature: 0.1,
            top_p: 0.001,
            repetition_penalty: 1.05,
            seed: -1,
            request_timeout_s: 600.0,
            max_retries: 5,
            wait_for_server_s: 900.0,
            initial_in_flight: 16,
            max_in_flight: 128,
            cache: true,
            usage_fields: true,
            prompt: "describe".into(),
            client: None,
        }
    }

    #[test]
    fn clips_are_planned_into_nemos_windows() {
        let mut s = stage();
        // 400 frames at 30 fps: windows 0-255 and 256-399 (144 ≥ 128); a 3-frame clip: none.
        let clips = [clip(400, 30.0, 4, 4), clip(3, 30.0, 4, 4)];
        let (jobs, short) = s.plan(&clips);
        assert_eq!((jobs.len(), short), (2, 1));
        assert_eq!((jobs[0].window, jobs[1].window), (Some(Window { start: 0, end: 255 }), Some(Window { start: 256, end: 399 })));
        assert_eq!(jobs[0].picked.as_ref().unwrap().len(), 18);
        assert_eq!(jobs[1].picked.as_ref().unwrap(), &vec![256, 272, 288, 304, 320, 335, 351, 367, 383, 399]);
        // Kept: a row of its own, no window, nothing to send.
        s.drop_short = false;
        let (jobs, short) = s.plan(&clips);
        assert_eq!((jobs.len(), short), (3, 1));
        assert_eq!((jobs[2].row, jobs[2].index, jobs[2].window), (1, -1, None));
        assert_eq!(jobs[2].picked, Ok(Vec::new()));
    }

    #[test]
    fn frames_go_as_one_video_part_or_as_images_then_the_prompt() {
        let mut s = stage();
        let c = clip(8, 2.0, 398, 224);
        let jpegs = s.encode(&c, &[0, 3]).unwrap();
        // Each frame sized as Qwen-VL sizes a 398 × 224 frame: 448 × 252.
        let first = curator_image::decode(&base64::engine::general_purpose::STANDARD.decode(&jpegs[0]).unwrap()).unwrap();
        assert_eq!((first.width, first.height), (448, 252));
        let body = serde_json::to_value(&s.chat(&jpegs).messages).unwrap();
        let content = &body[0]["content"];
        assert_eq!(content[0]["type"], "video_url");
        let url = content[0]["video_url"]["url"].as_str().unwrap();
        assert!(url.starts_with("data:video/jpeg;base64,"));
        assert_eq!(url.matches(',').count(), 2, "two frames, comma-separated");
        assert_eq!(content[1], serde_json::json!({"type": "text", "text": "describe"}));
        let chat = s.chat(&jpegs);
        assert_eq!((chat.max_tokens, chat.temperature, chat.top_p), (Some(512), Some(0.1), Some(0.001)));
        assert_eq!(chat.extra["repetition_penalty"], 1.05);
        s.frames_as = "images".into();
        let body = serde_json::to_value(&s.chat(&jpegs).messages).unwrap();
        let parts = body[0]["content"].as_array().unwrap();
        assert_eq!(parts.len(), 3);
        assert!(parts[..2].iter().all(|p| p["image_url"]["url"].as_str().unwrap().starts_with("data:image/jpeg;base64,")));
    }
}
