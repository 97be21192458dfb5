//! `curator-run`: what one run shares below the engine: a batch on its way through the stages
//! and the documents a stage could not process ([`task`]), the run's counters and its
//! Prometheus endpoint ([`metrics`]), and the machine's GPUs ([`gpu`]). The executor and the
//! dedup step both use them; neither owns them. The host re-exports each module.

pub mod gpu;
pub mod metrics;
pub mod task;

use curator_io as io;
use curator_io::os;
