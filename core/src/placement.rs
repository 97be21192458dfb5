//! GPU placement: which device(s) each GPU worker gets. Pure policy over an inventory, so it
//! is tested on simulated machines (8×80 GB, 2×141 GB, mixed) without a GPU.
//!
//! * `gpus: n` (n ≥ 1, whole) — n whole devices per worker.
//! * `gpus: f` (0 < f < 1) — a share f of one device.
//! * `gpu_memory_gb: g` — a share g / (that device's memory) of one device, computed per
//!   device and rounded *up* in millionths, so it is never zero (NeMo Curator rounds it to
//!   one decimal and gets 0 on cards over 200 GB). Larger than every device: refused.
//!
//! Whole-device requests are placed first, then shares largest first, each on the device with
//! the most room left, so a stage's workers spread over every card; where that leaves a
//! larger share no room, shares are packed instead (each on the fullest device it still fits).

use serde::{Deserialize, Serialize};

use crate::resources::Resources;

/// Capacity of one device in placement units (millionths of a device).
const UNIT: u64 = 1_000_000;

/// One GPU as discovered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDevice {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub memory_total_mb: u64,
    pub memory_free_mb: u64,
}

/// The devices a process may use when `CUDA_VISIBLE_DEVICES` is `spec` (as a cluster
/// scheduler sets it: Ray, Slurm's gres, a Kubernetes device plugin): the listed devices, in
/// the listed order, by UUID (`GPU-…`, a unique prefix is enough) or by ordinal. Ordinals are
/// taken as the driver's order, which is CUDA's for a machine of identical cards. Unset: all
/// of them. Empty or `-1`: none. Entries that name no device are returned as the second
/// value (for the message that explains an empty list).
pub fn visible_devices(spec: Option<&str>, all: Vec<GpuDevice>) -> (Vec<GpuDevice>, Vec<String>) {
    let Some(spec) = spec else { return (all, Vec::new()) };
    let mut out: Vec<GpuDevice> = Vec::new();
    let mut unknown = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let found = if let Ok(n) = entry.parse::<i64>() {
            if n < 0 {
                // CUDA stops at the first invalid ordinal.
                break;
            }
            all.iter().find(|d| d.index as i64 == n)
        } else {
            let mut m = all.iter().filter(|d| d.uuid.starts_with(entry));
            match (m.next(), m.next()) {
                (Some(d), None) => Some(d),
                _ => None,
            }
        };
        match found {
            Some(d) if !out.iter().any(|o| o.index == d.index) => out.push(d.clone()),
            Some(_) => {}
            None => unknown.push(entry.to_string()),
        }
    }
    (out, unknown)
}

/// What one worker of a stage asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GpuRequest {
    Whole(u32),
    Share(f64),
    MemoryGb(f64),
}

impl GpuRequest {
    /// The GPU part of a resource request, if any.
    pub fn from_resources(r: &Resources) -> Option<GpuRequest> {
        match (r.gpus, r.gpu_memory_gb) {
            (Some(g), _) if g >= 1.0 => Some(GpuRequest::Whole(g as u32)),
            (Some(g), _) if g > 0.0 => Some(GpuRequest::Share(g)),
            (_, Some(m)) if m > 0.0 => Some(GpuRequest::MemoryGb(m)),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            GpuRequest::Whole(n) => format!("gpus: {n}"),
            GpuRequest::Share(f) => format!("gpus: {f}"),
            GpuRequest::MemoryGb(g) => format!("gpu_memory_gb: {g}"),
        }
    }
}

/// A stage's GPU workers to place.
#[derive(Debug, Clone, PartialEq)]
pub struct StageGpuRequest {
    pub stage: String,
    pub request: GpuRequest,
    pub workers: usize,
}

/// Where one worker runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assignment {
    /// Device indices (`CUDA_VISIBLE_DEVICES`).
    pub devices: Vec<u32>,
    /// Fraction of each device the worker may use (1.0 for whole devices).
    pub share: f64,
    /// GPU memory budget in MB, enforced by the watchdog.
    pub memory_budget_mb: u64,
}

/// Why GPU workers cannot be placed. Each message names the stage and what it needs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlacementError {
    #[error("stage {stage:?} needs a GPU ({needs}) but none was found{}; to run it on the CPU where it can, set its resources: {{gpu_memory_gb: 0}} and its param device: cpu", if .detail.is_empty() { String::new() } else { format!(" ({})", .detail) })]
    NoGpus { stage: String, needs: String, detail: String },
    #[error("stage {stage:?} asks for gpu_memory_gb: {needs_gb} but the largest GPU here has {largest_gb:.1} GB")]
    TooLarge { stage: String, needs_gb: f64, largest_gb: f64 },
    #[error("stage {stage:?} asks for gpus: {needs} per worker but this machine has {found} GPU(s)")]
    TooManyDevices { stage: String, needs: u32, found: usize },
    #[error("stage {stage:?}: only {placed} of {wanted} workers ({needs} each) fit on {devices} GPU(s)")]
    Full { stage: String, wanted: usize, placed: usize, needs: String, devices: usize },
}

fn mem_gb(d: &GpuDevice) -> f64 {
    d.memory_total_mb as f64 / 1024.0
}

/// Units of device `d` one worker of `req` takes (never 0 for a positive request).
pub fn units_on(req: GpuRequest, d: &GpuDevice) -> u64 {
    match req {
        GpuRequest::Whole(_) => UNIT,
        GpuRequest::Share(f) => ((f * UNIT as f64).ceil() as u64).clamp(1, UNIT),
        GpuRequest::MemoryGb(g) => ((g / mem_gb(d) * UNIT as f64).ceil() as u64).max(1),
    }
}

/// Place every stage's workers, or say why not. Returns assignments in input order.
///
/// Whole cards go first. Shares of a card spread over the cards (each worker on the card with
/// the most room left), so a stage's workers run side by side on every card instead of
/// time-slicing the first: on two H200s, 8 embedder workers packed onto one card ran 45.8 k
/// docs/s against 41.2 k on one card alone. Where spreading leaves no room for a larger
/// share, the shares are packed instead (each on the card with the least room that fits).
pub fn place(gpus: &[GpuDevice], requests: &[StageGpuRequest]) -> Result<Vec<Vec<Assignment>>, PlacementError> {
    match place_with(gpus, requests, Fit::Spread) {
        Err(PlacementError::Full { .. }) => place_with(gpus, requests, Fit::Pack),
        placed => placed,
    }
}

/// Where a worker asking for a share of a card goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fit {
    /// The card with the most room left.
    Spread,
    /// The card with the least room that still fits.
    Pack,
}

fn place_with(gpus: &[GpuDevice], requests: &[StageGpuRequest], fit: Fit) -> Result<Vec<Vec<Assignment>>, PlacementError> {
    let mut free: Vec<u64> = vec![UNIT; gpus.len()];
    let mut out: Vec<Vec<Assignment>> = vec![Vec::new(); requests.len()];
    // Whole devices first, then shares from the largest.
    let mut order: Vec<usize> = (0..requests.len()).collect();
    let weight = |r: &StageGpuRequest| match r.request {
        GpuRequest::Whole(n) => (2u8, n as f64),
        GpuRequest::Share(f) => (1, f),
        GpuRequest::MemoryGb(g) => (1, g / gpus.iter().map(mem_gb).fold(f64::MIN, f64::max).max(1e-9)),
    };
    order.sort_by(|&a, &b| weight(&requests[b]).partial_cmp(&weight(&requests[a])).unwrap_or(std::cmp::Ordering::Equal));
    for i in order {
        let r = &requests[i];
        if gpus.is_empty() {
            return Err(PlacementError::NoGpus { stage: r.stage.clone(), needs: r.request.describe(), detail: String::new() });
        }
        match r.request {
            GpuRequest::Whole(n) if n as usize > gpus.len() => {
                return Err(PlacementError::TooManyDevices { stage: r.stage.clone(), needs: n, found: gpus.len() });
            }
            GpuRequest::MemoryGb(g) if gpus.iter().all(|d| mem_gb(d) < g) => {
                let largest = gpus.iter().map(mem_gb).fold(0.0, f64::max);
                return Err(PlacementError::TooLarge { stage: r.stage.clone(), needs_gb: g, largest_gb: largest });
            }
            _ => {}
        }
        for placed in 0..r.workers {
            let assignment = match r.request {
                GpuRequest::Whole(n) => {
                    let devs: Vec<usize> = (0..gpus.len()).filter(|&d| free[d] == UNIT).take(n as usize).collect();
                    if devs.len() < n as usize {
                        None
                    } else {
                        devs.iter().for_each(|&d| free[d] = 0);
                        let budget = devs.iter().map(|&d| gpus[d].memory_total_mb).sum();
                        Some(Assignment { devices: devs.iter().map(|&d| gpus[d].index).collect(), share: 1.0, memory_budget_mb: budget })
                    }
                }
                req => {
                    let fits = (0..gpus.len()).filter(|&d| units_on(req, &gpus[d]) <= free[d]);
                    let room = |d: usize| free[d] - units_on(req, &gpus[d]);
                    let best = match fit {
                        Fit::Spread => fits.max_by_key(|&d| (room(d), std::cmp::Reverse(d))),
                        Fit::Pack => fits.min_by_key(|&d| (room(d), d)),
                    };
                    best.map(|d| {
                        let units = units_on(req, &gpus[d]);
                        free[d] -= units;
                        let budget = match req {
                            GpuRequest::MemoryGb(g) => (g * 1024.0).round() as u64,
                            _ => gpus[d].memory_total_mb * units / UNIT,
                        };
                        Assignment { devices: vec![gpus[d].index], share: units as f64 / UNIT as f64, memory_budget_mb: budget }
                    })
                }
            };
            match assignment {
                Some(a) => out[i].push(a),
                None => {
                    return Err(PlacementError::Full {
                        stage: r.stage.clone(),
                        wanted: r.workers,
                        placed,
                        needs: r.request.describe(),
                        devices: gpus.len(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// One GPU stage of a pipeline: its request and, when the pipeline fixes it, its worker count.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuStage {
    pub stage: String,
    pub request: GpuRequest,
    /// `num_workers` from the pipeline; `None`: as many as fit.
    pub fixed: Option<usize>,
    /// Cores each worker needs (`cpus`).
    pub cpus: f64,
}

/// Place every GPU stage of a pipeline at once: stages with a fixed count get it, the others
/// as many workers as fit, shrinking the largest flexible pool until all fit together. Per
/// stage (in order): the worker assignments. An error names the stage that cannot be placed.
///
/// Workers of a share of a card (`gpu_memory_gb`) also hold `cpus` cores each, and a GPU
/// stage's workers are busy on the CPU too (tokenizing, decoding): flexible pools are first
/// trimmed to what `cores` can feed (the count nearest to the cores, at least one). On an
/// H100 with 16 cores, 4 embedder workers of 4 cores ran 14.4 k docs/s where the 9 that fit
/// the card's memory ran 11.7 k. Whole-card requests (`gpus`) are not trimmed: cards are the
/// scarcer resource.
pub fn place_stages(gpus: &[GpuDevice], stages: &[GpuStage], cores: f64) -> Result<Vec<Vec<Assignment>>, PlacementError> {
    let mut counts: Vec<usize> = stages.iter().map(|s| s.fixed.unwrap_or_else(|| max_workers(gpus, s.request).max(1))).collect();
    let trimmable =
        |k: usize, counts: &[usize]| stages[k].fixed.is_none() && !matches!(stages[k].request, GpuRequest::Whole(_)) && counts[k] > 1;
    loop {
        let used: f64 = stages.iter().zip(&counts).map(|(s, c)| s.cpus * *c as f64).sum();
        let victim = (0..counts.len()).filter(|&k| trimmable(k, &counts)).max_by_key(|&k| counts[k]);
        match victim {
            // Drop a worker while that brings the cores used nearer to the cores there are.
            Some(k) if used - cores > stages[k].cpus / 2.0 => counts[k] -= 1,
            _ => break,
        }
    }
    loop {
        let reqs: Vec<StageGpuRequest> =
            stages.iter().zip(&counts).map(|(s, c)| StageGpuRequest { stage: s.stage.clone(), request: s.request, workers: *c }).collect();
        match place(gpus, &reqs) {
            Ok(assignments) => return Ok(assignments),
            Err(PlacementError::Full { .. }) if stages.iter().zip(&counts).any(|(s, c)| *c > 1 && s.fixed.is_none()) => {
                let k = (0..counts.len()).filter(|k| counts[*k] > 1 && stages[*k].fixed.is_none()).max_by_key(|k| counts[*k]).unwrap_or(0);
                counts[k] -= 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The order a GPU stage's workers start in, and how many of them start first: one per card
/// (per device set), the rest once one of those is set up. The CUDA driver creates contexts
/// one after another for the whole machine, and processes that ask at once all finish
/// together: on two H200s a context took 0.23 s alone and 1.2 s for each of eight processes
/// started at once (on one card or spread over both), so eight embedder workers started
/// together kept both cards idle for 1.7 s, where one per card is set up in well under a
/// second and works while the others load. The returned order deals the assignments out
/// card by card, so the first wave covers every card and each later prefix stays spread.
pub fn start_waves(assignments: &[Assignment]) -> (Vec<Assignment>, usize) {
    let mut cards: Vec<Vec<Assignment>> = Vec::new();
    for a in assignments {
        match cards.iter_mut().find(|c| c[0].devices == a.devices) {
            Some(c) => c.push(a.clone()),
            None => cards.push(vec![a.clone()]),
        }
    }
    let first = cards.len();
    let deepest = cards.iter().map(Vec::len).max().unwrap_or(0);
    let order = (0..deepest).flat_map(|round| cards.iter().filter_map(move |c| c.get(round).cloned())).collect();
    (order, first)
}

/// The CPUs of worker `k` of a stage whose workers need `cpus` cores each: consecutive
/// shares of `allowed`, wrapping around when there are more workers than cores.
pub fn cpu_share(allowed: &[usize], k: usize, cpus: f64) -> Vec<usize> {
    if allowed.is_empty() {
        return Vec::new();
    }
    let n = (cpus.ceil() as usize).clamp(1, allowed.len());
    (0..n).map(|j| allowed[(k * n + j) % allowed.len()]).collect()
}

/// How many workers of one request fit on an empty inventory (for sizing a pool).
pub fn max_workers(gpus: &[GpuDevice], req: GpuRequest) -> usize {
    match req {
        GpuRequest::Whole(n) if n > 0 => gpus.len() / n as usize,
        GpuRequest::Whole(_) => 0,
        _ => gpus.iter().map(|d| (UNIT / units_on(req, d)) as usize).sum(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn visible_devices_follow_the_schedulers_list() {
        let dev = |index: u32, uuid: &str| GpuDevice {
            index,
            uuid: uuid.into(),
            name: "H100".into(),
            memory_total_mb: 80_000,
            memory_free_mb: 80_000,
        };
        let all = vec![dev(0, "GPU-aaaa-1"), dev(1, "GPU-bbbb-2"), dev(2, "GPU-cccc-3")];
        let idx = |v: (Vec<GpuDevice>, Vec<String>)| v.0.iter().map(|d| d.index).collect::<Vec<_>>();
        assert_eq!(idx(visible_devices(None, all.clone())), [0, 1, 2]);
        assert_eq!(idx(visible_devices(Some("1"), all.clone())), [1]);
        assert_eq!(idx(visible_devices(Some("2,0"), all.clone())), [2, 0]);
        assert_eq!(idx(visible_devices(Some("GPU-bbbb"), all.clone())), [1]);
        assert_eq!(idx(visible_devices(Some(""), all.clone())), Vec::<u32>::new());
        assert_eq!(idx(visible_devices(Some("0,-1,2"), all.clone())), [0]);
        assert_eq!(idx(visible_devices(Some("GPU-"), all.clone())), Vec::<u32>::new(), "an ambiguous prefix names nothing");
        assert_eq!(visible_devices(Some("7"), all).1, ["7"]);
    }

    use super::*;

    #[test]
    fn workers_start_one_per_card_first() {
        let on = |d: u32| Assignment { devices: vec![d], share: 0.1, memory_budget_mb: 4096 };
        // Packed placement: three on card 0, one on card 1.
        let (order, first) = start_waves(&[on(0), on(0), on(0), on(1)]);
        assert_eq!(first, 2);
        assert_eq!(order.iter().map(|a| a.devices[0]).collect::<Vec<_>>(), vec![0, 1, 0, 0]);
        let (order, first) = start_waves(&[on(0), on(1), on(0), on(1)]);
        assert_eq!((order.iter().map(|a| a.devices[0]).collect::<Vec<_>>(), first), (vec![0, 1, 0, 1], 2));
        // Whole cards: every worker has its own, so all start at once.
        let pair = |a: u32, b: u32| Assignment { devices: vec![a, b], share: 1.0, memory_budget_mb: 1 };
        assert_eq!(start_waves(&[pair(0, 1), pair(2, 3)]).1, 2);
        assert_eq!(start_waves(&[]), (Vec::new(), 0));
    }

    #[test]
    fn cpu_shares_are_consecutive_and_wrap() {
        let cpus: Vec<usize> = (0..8).collect();
        assert_eq!(cpu_share(&cpus, 0, 2.0), vec![0, 1]);
        assert_eq!(cpu_share(&cpus, 3, 2.0), vec![6, 7]);
        assert_eq!(cpu_share(&cpus, 4, 2.0), vec![0, 1]);
        assert_eq!(cpu_share(&cpus, 1, 0.5), vec![1]);
        assert_eq!(cpu_share(&cpus, 0, 64.0).len(), 8);
        assert!(cpu_share(&[], 0, 1.0).is_empty());
    }

    #[test]
    fn stages_share_the_cards_and_flexible_pools_shrink() {
        let gpus = cards(&[80]);
        let stage = |name: &str, gb: f64, fixed| GpuStage { stage: name.into(), request: GpuRequest::MemoryGb(gb), fixed, cpus: 1.0 };
        let placed = place_stages(&gpus, &[stage("a", 20.0, None), stage("b", 20.0, Some(2))], 64.0).unwrap();
        assert_eq!((placed[0].len(), placed[1].len()), (2, 2));
        assert!(matches!(place_stages(&[], &[stage("a", 1.0, None)], 64.0), Err(PlacementError::NoGpus { .. })));
        assert!(matches!(place_stages(&gpus, &[stage("a", 100.0, None)], 64.0), Err(PlacementError::TooLarge { .. })));
    }

    #[test]
    fn flexible_gpu_pools_are_trimmed_to_the_cores_that_feed_them() {
        let gpus = cards(&[80]);
        let stage = |gb: f64, fixed, cpus| GpuStage { stage: "s".into(), request: GpuRequest::MemoryGb(gb), fixed, cpus };
        // 9 fit the card's memory; 15.2 cores feed 4 workers of 4 cores (16 is nearer 15.2 than 12).
        assert_eq!(place_stages(&gpus, &[stage(8.0, None, 4.0)], 15.2).unwrap()[0].len(), 4);
        // Two stages share the cores; a fixed count is kept whatever it costs.
        let two = place_stages(&gpus, &[stage(4.0, None, 4.0), stage(4.0, Some(3), 4.0)], 16.0).unwrap();
        assert_eq!((two[0].len(), two[1].len()), (1, 3));
        // At least one worker; light workers still fill the card.
        assert_eq!(place_stages(&gpus, &[stage(8.0, None, 64.0)], 2.0).unwrap()[0].len(), 1);
        assert_eq!(place_stages(&gpus, &[stage(4.0, None, 0.25)], 16.0).unwrap()[0].len(), 20);
        // Whole cards are not trimmed.
        let eight = cards(&[80; 8]);
        let whole = GpuStage { stage: "w".into(), request: GpuRequest::Whole(1), fixed: None, cpus: 8.0 };
        assert_eq!(place_stages(&eight, &[whole], 16.0).unwrap()[0].len(), 8);
    }

    fn cards(gb: &[u64]) -> Vec<GpuDevice> {
        gb.iter()
            .enumerate()
            .map(|(i, g)| GpuDevice {
                index: i as u32,
                uuid: format!("GPU-{i}"),
                name: "sim".into(),
                memory_total_mb: g * 1024,
                memory_free_mb: g * 1024,
            })
            .collect()
    }

    fn req(stage: &str, request: GpuRequest, workers: usize) -> StageGpuRequest {
        StageGpuRequest { stage: stage.into(), request, workers }
    }

    #[test]
    fn whole_devices_on_8x80() {
        let gpus = cards(&[80; 8]);
        let a = place(&gpus, &[req("embed", GpuRequest::Whole(1), 8)]).unwrap();
        let devs: Vec<u32> = a[0].iter().map(|x| x.devices[0]).collect();
        assert_eq!(devs, (0..8).collect::<Vec<_>>());
        assert_eq!(a[0][0].memory_budget_mb, 80 * 1024);
        let e = place(&gpus, &[req("embed", GpuRequest::Whole(1), 9)]).unwrap_err();
        assert_eq!(e.to_string(), "stage \"embed\": only 8 of 9 workers (gpus: 1 each) fit on 8 GPU(s)");
        let two = place(&gpus, &[req("big", GpuRequest::Whole(2), 4)]).unwrap();
        assert_eq!(two[0][3].devices, vec![6, 7]);
        assert!(matches!(place(&gpus, &[req("x", GpuRequest::Whole(9), 1)]), Err(PlacementError::TooManyDevices { .. })));
    }

    #[test]
    fn memory_shares_bin_pack() {
        // 20 GB on 80 GB cards: 4 per card, 32 on 8 cards.
        let gpus = cards(&[80; 8]);
        assert_eq!(max_workers(&gpus, GpuRequest::MemoryGb(20.0)), 32);
        let a = place(&gpus, &[req("cls", GpuRequest::MemoryGb(20.0), 4)]).unwrap();
        let cards_used: Vec<u32> = a[0].iter().map(|x| x.devices[0]).collect();
        assert_eq!(cards_used, vec![0, 1, 2, 3], "shares spread over the cards: {a:?}");
        assert!((a[0][0].share - 0.25).abs() < 1e-6);
        assert_eq!(a[0][0].memory_budget_mb, 20 * 1024);
        // 35 GB on 2×141 GB: 4 per card (35/141 = 0.248).
        let h200 = cards(&[141, 141]);
        assert_eq!(max_workers(&h200, GpuRequest::MemoryGb(35.0)), 8);
        assert!(place(&h200, &[req("cls", GpuRequest::MemoryGb(35.0), 8)]).is_ok());
        assert!(place(&h200, &[req("cls", GpuRequest::MemoryGb(35.0), 9)]).is_err());
    }

    #[test]
    fn shares_spread_over_cards_and_pack_where_spreading_leaves_no_room() {
        // 8 workers of 4 GB on two H200s: 4 on each card, alternating.
        let h200 = cards(&[141, 141]);
        let a = place(&h200, &[req("embed", GpuRequest::MemoryGb(4.0), 8)]).unwrap();
        let on: Vec<u32> = a[0].iter().map(|x| x.devices[0]).collect();
        assert_eq!(on, vec![0, 1, 0, 1, 0, 1, 0, 1]);
        // Two stages share both cards.
        let a = place(&h200, &[req("embed", GpuRequest::MemoryGb(4.0), 2), req("cls", GpuRequest::MemoryGb(4.0), 2)]).unwrap();
        assert!(a.iter().all(|s| s.iter().map(|x| x.devices[0]).collect::<Vec<_>>() == vec![0, 1]), "{a:?}");
        // 60 + 2×40 + 2×30 GB on two 100 GB cards: spread, the last 30 GB finds no room
        // (10 and 20 GB left); packed, everything fits (60+40 and 40+30+30).
        let gpus = cards(&[100, 100]);
        let reqs =
            [req("a", GpuRequest::MemoryGb(60.0), 1), req("b", GpuRequest::MemoryGb(40.0), 2), req("c", GpuRequest::MemoryGb(30.0), 2)];
        assert!(matches!(place_with(&gpus, &reqs, Fit::Spread), Err(PlacementError::Full { .. })));
        let a = place(&gpus, &reqs).unwrap();
        assert_eq!(a, place_with(&gpus, &reqs, Fit::Pack).unwrap());
        assert_eq!(a[0][0].devices, vec![0]);
        assert_eq!(a[2].iter().map(|x| x.devices[0]).collect::<Vec<_>>(), vec![1, 1]);
    }

    #[test]
    fn small_requests_on_huge_cards_are_never_zero() {
        let big = cards(&[288]);
        let u = units_on(GpuRequest::MemoryGb(1.0), &big[0]);
        assert!(u > 0 && u < UNIT / 100, "{u}");
        assert!(units_on(GpuRequest::MemoryGb(0.001), &big[0]) >= 1);
        assert_eq!(max_workers(&big, GpuRequest::MemoryGb(10.0)), 28);
    }

    #[test]
    fn too_large_and_no_gpu_refused_with_names() {
        let gpus = cards(&[80; 8]);
        let e = place(&gpus, &[req("llm", GpuRequest::MemoryGb(100.0), 1)]).unwrap_err();
        assert_eq!(e.to_string(), "stage \"llm\" asks for gpu_memory_gb: 100 but the largest GPU here has 80.0 GB");
        let e = place(&[], &[req("embed", GpuRequest::Whole(1), 1)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stage \"embed\" needs a GPU (gpus: 1) but none was found; to run it on the CPU where it can, set its resources: {gpu_memory_gb: 0} and its param device: cpu"
        );
    }

    #[test]
    fn mixed_inventory_and_mixed_requests() {
        // One 80 GB and one 24 GB card: 30 GB workers only fit the big one; a whole-GPU stage
        // is placed first and takes a card whole.
        let gpus = cards(&[80, 24]);
        assert_eq!(max_workers(&gpus, GpuRequest::MemoryGb(30.0)), 2);
        let a = place(&gpus, &[req("cls", GpuRequest::MemoryGb(10.0), 2), req("embed", GpuRequest::Whole(1), 1)]).unwrap();
        assert_eq!(a[1][0].devices, vec![0], "whole-device request placed first, on the first free card");
        assert!(a[0].iter().all(|x| x.devices == vec![1]), "shares go to the remaining card: {a:?}");
        // Fractions share a card with each other.
        let a = place(&cards(&[80]), &[req("a", GpuRequest::Share(0.5), 1), req("b", GpuRequest::Share(0.25), 2)]).unwrap();
        assert_eq!(a.iter().map(|v| v.len()).sum::<usize>(), 3);
        assert!(place(&cards(&[80]), &[req("a", GpuRequest::Share(0.5), 3)]).is_err());
    }

    #[test]
    fn request_from_resources() {
        let mut r = Resources::default();
        assert_eq!(GpuRequest::from_resources(&r), None);
        r.gpus = Some(2.0);
        assert_eq!(GpuRequest::from_resources(&r), Some(GpuRequest::Whole(2)));
        r.gpus = Some(0.5);
        assert_eq!(GpuRequest::from_resources(&r), Some(GpuRequest::Share(0.5)));
        r.gpus = None;
        r.gpu_memory_gb = Some(16.0);
        assert_eq!(GpuRequest::from_resources(&r), Some(GpuRequest::MemoryGb(16.0)));
    }
}
