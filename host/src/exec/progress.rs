//! Progress while a run goes: one line per stage on a terminal, status lines in the log
//! otherwise; and the peak memory of the host and its workers, sampled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::metrics::RunMetrics;

/// Progress: one line per stage on a terminal, status lines in the log otherwise.
pub(crate) fn spawn_status(
    metrics: &Arc<RunMetrics>,
    stop: &Arc<AtomicBool>,
    interval_s: f64,
    queue_capacity: usize,
    peak: &Arc<AtomicU64>,
) {
    let (metrics, stop, peak) = (metrics.clone(), stop.clone(), peak.clone());
    let every = Duration::from_secs_f64(interval_s.max(0.1));
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = std::thread::Builder::new().name("curator-status".into()).spawn(move || {
        let t0 = Instant::now();
        let bars = terminal.then(|| {
            let multi = indicatif::MultiProgress::new();
            let style =
                indicatif::ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
            let bars: Vec<indicatif::ProgressBar> =
                (0..metrics.stages.len()).map(|_| multi.add(indicatif::ProgressBar::new_spinner().with_style(style.clone()))).collect();
            (multi, bars)
        });
        let mut next = every;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            metrics.sample_workers();
            peak.fetch_max(crate::os::tree_rss_bytes(), Ordering::Relaxed);
            match &bars {
                Some((_, bars)) => {
                    for (i, bar) in bars.iter().enumerate() {
                        bar.set_message(metrics.stage_line(i, t0.elapsed(), queue_capacity));
                        bar.tick();
                    }
                }
                None if t0.elapsed() >= next => {
                    tracing::info!("{}", metrics.status_line(t0.elapsed()));
                    next += every;
                }
                None => {}
            }
        }
        if let Some((_, bars)) = bars {
            for (i, bar) in bars.iter().enumerate() {
                bar.finish_with_message(metrics.stage_line(i, t0.elapsed(), queue_capacity));
            }
        }
    });
}
