//! Every working place a run uses besides its outputs, decided once, here, at plan time, by
//! one rule; execution only reads the plan.
//!
//! The root is `execution.spill_dir` when it is set, else the output directory; either may be
//! local or an object store. Each kind of work has a name (`_spill` for batch mode's stage
//! outputs, `_dedup_work` for a dedup step):
//! - a local root holds it as `ROOT/NAME`;
//! - under an object-store root, work that must be local (batch mode's spill; a dedup step
//!   run on one machine) goes to the system's temporary directory, named after the URL
//!   (`curator-NAME-HASH`, so a rerun finds it) and, for work of this process only, after the
//!   process too; a dedup step run as phases on several machines exchanges its work through
//!   `ROOT/NAME` itself, each phase working in a scratch directory of its own.

use std::path::{Path, PathBuf};

use curator_core::PipelineSpec;

use crate::io::{IoError, Loc};

/// Batch mode's stage outputs (Arrow IPC, one directory per stage).
pub const SPILL: &str = "_spill";
/// A dedup step's work (`dedup::work`: the spilled documents, keys, buckets, markers).
pub const DEDUP_WORK: &str = "_dedup_work";
/// The working directories a local output directory may hold, which are not outputs.
pub const IN_OUTPUT_DIR: &[&str] = &[SPILL, DEDUP_WORK];

/// A kind of work, and whether it outlives the process that does it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Batch mode's spill: this process's alone.
    Spill,
    /// A dedup step: resumed by a rerun; `phases` when its phases run apart (`--phase`).
    DedupWork { phases: bool },
}

/// Where a piece of work goes: a local directory, and the object-store prefix it is
/// exchanged through (a dedup step run as phases under an object-store root).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkPlace {
    pub local: PathBuf,
    pub exchange: Option<Loc>,
}

/// The run's working places.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkDirs {
    /// Where batch mode spills each stage's output for the next one.
    pub batch_spill: PathBuf,
}

impl WorkDirs {
    pub fn plan(spec: &PipelineSpec, output: &Loc) -> Result<WorkDirs, IoError> {
        Ok(WorkDirs { batch_spill: place(spec, output, Kind::Spill)?.local })
    }
}

/// Where a pipeline's dedup step works (`phases`: its phases run apart, `--phase`).
pub fn dedup_work(spec: &PipelineSpec, output: &Loc, phases: bool) -> Result<WorkPlace, IoError> {
    place(spec, output, Kind::DedupWork { phases })
}

/// The one rule (see the module's comment).
fn place(spec: &PipelineSpec, output: &Loc, kind: Kind) -> Result<WorkPlace, IoError> {
    let name = match kind {
        Kind::Spill => SPILL,
        Kind::DedupWork { .. } => DEDUP_WORK,
    };
    let root = match &spec.execution.spill_dir {
        Some(d) => Loc::parse(d, Path::new(""))?,
        None => output.clone(),
    };
    let remote = match root {
        Loc::Local(d) => return Ok(WorkPlace { local: d.join(name), exchange: None }),
        remote => remote.join(name),
    };
    let named = format!("curator-{}-{:016x}", name.trim_start_matches('_'), xxhash_rust::xxh3::xxh3_64(remote.display().as_bytes()));
    let this_process = || std::env::temp_dir().join(format!("{named}-{}", std::process::id()));
    Ok(match kind {
        Kind::Spill => WorkPlace { local: this_process(), exchange: None },
        Kind::DedupWork { phases: true } => WorkPlace { local: this_process(), exchange: Some(remote) },
        Kind::DedupWork { phases: false } => WorkPlace { local: std::env::temp_dir().join(named), exchange: None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(spill_dir: Option<&str>) -> PipelineSpec {
        let spill = spill_dir.map(|d| format!("execution:\n  spill_dir: {d}\n")).unwrap_or_default();
        PipelineSpec::from_yaml("p.yaml", &format!("source: {{path: in}}\nsink: {{path: out}}\n{spill}stages: []\n")).unwrap()
    }

    #[test]
    fn local_roots_hold_the_work_under_its_name() {
        let out = Loc::Local(PathBuf::from("/data/out"));
        let plain = spec(None);
        assert_eq!(WorkDirs::plan(&plain, &out).unwrap().batch_spill, PathBuf::from("/data/out/_spill"));
        assert_eq!(dedup_work(&plain, &out, true).unwrap(), WorkPlace { local: "/data/out/_dedup_work".into(), exchange: None });
        let spilled = spec(Some("/scratch"));
        assert_eq!(WorkDirs::plan(&spilled, &out).unwrap().batch_spill, PathBuf::from("/scratch/_spill"));
        assert_eq!(dedup_work(&spilled, &out, false).unwrap().local, PathBuf::from("/scratch/_dedup_work"));
    }

    #[test]
    fn object_store_roots_work_locally_and_phases_exchange_through_the_store() {
        let out = Loc::parse("s3://bucket/out", Path::new("")).unwrap();
        let plain = spec(None);
        let spill = WorkDirs::plan(&plain, &out).unwrap().batch_spill;
        let tmp = std::env::temp_dir();
        assert!(spill.starts_with(&tmp) && spill.to_string_lossy().ends_with(&format!("-{}", std::process::id())), "{spill:?}");
        let one_machine = dedup_work(&plain, &out, false).unwrap();
        assert_eq!(one_machine.exchange, None);
        assert!(one_machine.local.starts_with(&tmp), "{one_machine:?}");
        assert_eq!(one_machine, dedup_work(&plain, &out, false).unwrap(), "a rerun finds its work");
        let phases = dedup_work(&plain, &out, true).unwrap();
        assert_eq!(phases.exchange.map(|l| l.display()), Some("s3://bucket/out/_dedup_work".to_string()));
        let spilled = dedup_work(&spec(Some("s3://bucket/scratch")), &Loc::Local("/out".into()), true).unwrap();
        assert_eq!(spilled.exchange.map(|l| l.display()), Some("s3://bucket/scratch/_dedup_work".to_string()));
    }
}
