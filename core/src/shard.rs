//! Shards: which partitions of a run one job of a cluster array runs (`--shard I/N`).
//!
//! The owner of each partition is a pure function of the partition list: partitions are
//! cut, in order, into N contiguous runs of about equal bytes (a partition belongs to the
//! shard its byte midpoint falls in). The same input listing gives the same shards on every
//! rerun, every partition has exactly one owner, and two shards never write the same output
//! file (output names are a function of the partition).

/// Shard `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// Why a shard setting is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("--shard {0:?}: expected I/N with 0 <= I < N, e.g. 3/8")]
    Syntax(String),
    #[error("--shard-from-env: {0}")]
    Env(String),
    #[error("--phase {0:?}: expected docs, buckets, components or output")]
    Phase(String),
}

impl Shard {
    /// `I/N`.
    pub fn parse(s: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError::Syntax(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// From a job array's environment (`get` looks a variable up): Slurm's
    /// `SLURM_ARRAY_TASK_ID` (less `SLURM_ARRAY_TASK_MIN`) of `SLURM_ARRAY_TASK_COUNT`, or a
    /// Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` of `CURATOR_SHARD_COUNT` (set it to
    /// the Job's `completions`).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Shard, ShardError> {
        let num = |k: &str| -> Result<Option<usize>, ShardError> {
            get(k).map(|v| v.trim().parse::<usize>().map_err(|_| ShardError::Env(format!("{k}={v:?} is not a number")))).transpose()
        };
        let (index, count) = if let Some(id) = num("SLURM_ARRAY_TASK_ID")? {
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let count = num("SLURM_ARRAY_TASK_COUNT")?
                .ok_or_else(|| ShardError::Env("SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT".into()))?;
            (id.checked_sub(min).ok_or_else(|| ShardError::Env(format!("SLURM_ARRAY_TASK_ID {id} < SLURM_ARRAY_TASK_MIN {min}")))?, count)
        } else if let Some(id) = num("JOB_COMPLETION_INDEX")? {
            let count = num("CURATOR_SHARD_COUNT")?.ok_or_else(|| {
                ShardError::Env("JOB_COMPLETION_INDEX is set but not CURATOR_SHARD_COUNT (set it to the Job's completions)".into())
            })?;
            (id, count)
        } else {
            return Err(ShardError::Env("neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set".into()));
        };
        Shard::parse(&format!("{index}/{count}"))
    }

    /// The shard's file-name tag: `shard-0003-of-0008`.
    pub fn tag(&self) -> String {
        format!("shard-{:04}-of-{:04}", self.index, self.count)
    }

    /// The shard a [`Shard::tag`] names.
    pub fn from_tag(tag: &str) -> Option<Shard> {
        let (i, n) = tag.strip_prefix("shard-")?.split_once("-of-")?;
        let (index, count) = (i.parse().ok()?, n.parse().ok()?);
        (index < count).then_some(Shard { index, count })
    }
}

/// One phase of a pipeline with a dedup step, run on its own (`run --phase P`), so that a
/// cluster's job arrays (or a Ray driver) can run the step across machines:
///
/// | phase | sharded over | does |
/// |---|---|---|
/// | `docs` | partitions (`owners`) | the stages in front of the step, into the shared spill, then this shard's keys or signatures |
/// | `buckets` | LSH passes (`owns_pass`); semantic: runs of documents | fuzzy: the candidate pairs of the passes it owns (exact: nothing); semantic: k-means fitted by all bucket shards together (they run at once), then the clusters it owns |
/// | `components` | — (one job) | verification (or the bucket shards' pairs joined), groups, `_duplicates/` |
/// | `output` | partitions (`owners`) | the verdict applied, the stages after the step, the sink |
///
/// Each phase reads only what the earlier phases wrote to the shared work directory; run in
/// this order they give what one machine gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Docs,
    Buckets,
    Components,
    Output,
}

impl Phase {
    pub const ALL: [Phase; 4] = [Phase::Docs, Phase::Buckets, Phase::Components, Phase::Output];

    pub fn parse(s: &str) -> Result<Phase, ShardError> {
        Phase::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| ShardError::Phase(s.to_string()))
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Docs => "docs",
            Phase::Buckets => "buckets",
            Phase::Components => "components",
            Phase::Output => "output",
        }
    }

    /// Whether `--shard I/N` cuts this phase's work (all but `components`).
    pub fn sharded(self) -> bool {
        self != Phase::Components
    }

    /// Whether the phase's shards own partitions (`docs`, `output`) rather than passes.
    pub fn over_partitions(self) -> bool {
        matches!(self, Phase::Docs | Phase::Output)
    }
}

/// Whether bucket shard `shard` runs LSH pass `pass` (passes dealt round-robin, so that a
/// shard count above the number of passes leaves the extra shards idle, never overlapping).
pub fn owns_pass(shard: Shard, pass: usize) -> bool {
    pass % shard.count.max(1) == shard.index
}

/// The shard owning each partition, given each partition's size in bytes (in partition
/// order): contiguous runs of about `total / count` bytes.
pub fn owners(sizes: &[u64], count: usize) -> Vec<usize> {
    let count = count.max(1);
    let total: u128 = sizes.iter().map(|&s| s.max(1) as u128).sum();
    let mut before: u128 = 0;
    sizes
        .iter()
        .map(|&s| {
            let s = s.max(1) as u128;
            let mid2 = 2 * before + s; // twice the partition's byte midpoint
            before += s;
            ((mid2 * count as u128) / (2 * total.max(1))).min(count as u128 - 1) as usize
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_one_owner_in_contiguous_balanced_runs() {
        let mut x: u64 = 7;
        for n_parts in [1usize, 2, 5, 17, 100] {
            let sizes: Vec<u64> = (0..n_parts)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    1 + (x >> 40) % 1000
                })
                .collect();
            for count in 1..=8 {
                let o = owners(&sizes, count);
                assert_eq!(o.len(), n_parts);
                assert!(o.windows(2).all(|w| w[0] <= w[1]), "contiguous: {o:?}");
                assert!(o.iter().all(|&s| s < count));
                if n_parts >= count * 4 {
                    // Every shard gets work, and none more than twice its share plus one partition.
                    let total: u64 = sizes.iter().sum();
                    for s in 0..count {
                        let mine: u64 = sizes.iter().zip(&o).filter(|(_, w)| **w == s).map(|(z, _)| *z).sum();
                        assert!(mine > 0 && mine <= 2 * total / count as u64 + 1000, "shard {s} of {count}: {mine} of {total}");
                    }
                }
                assert_eq!(owners(&sizes, count), o, "stable");
            }
        }
    }

    #[test]
    fn phases_parse_and_passes_are_dealt_to_exactly_one_shard() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.name()), Ok(p));
        }
        assert!(Phase::parse("scan").is_err());
        for count in 1..6 {
            for pass in 0..13 {
                let owners: Vec<usize> = (0..count).filter(|&i| owns_pass(Shard { index: i, count }, pass)).collect();
                assert_eq!(owners.len(), 1, "pass {pass} of {count} shards: {owners:?}");
            }
        }
    }

    #[test]
    fn shards_parse_from_flags_and_job_arrays() {
        assert_eq!(Shard::parse("3/8"), Ok(Shard { index: 3, count: 8 }));
        assert!(Shard::parse("8/8").is_err() && Shard::parse("x").is_err() && Shard::parse("0/0").is_err());
        let s = Shard { index: 3, count: 12 };
        assert_eq!(Shard::from_tag(&s.tag()), Some(s));
        assert_eq!(Shard::from_tag("shard-0003-of-0003"), None);
        assert_eq!(Shard::from_tag("shard-x-of-0003"), None);
        let env =
            |vars: &'static [(&'static str, &'static str)]| move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        assert_eq!(
            Shard::from_env(env(&[("SLURM_ARRAY_TASK_ID", "5"), ("SLURM_ARRAY_TASK_MIN", "1"), ("SLURM_ARRAY_TASK_COUNT", "8")])),
            Ok(Shard { index: 4, count: 8 })
        );
        assert_eq!(Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "2"), ("CURATOR_SHARD_COUNT", "4")])), Ok(Shard { index: 2, count: 4 }));
        assert!(Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "2")])).is_err());
        assert!(Shard::from_env(env(&[])).is_err());
    }
}
