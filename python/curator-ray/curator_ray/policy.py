"""What a pipeline becomes on Ray: pure functions of `curator-host plan --json`, tested
without a cluster.

A task is one `curator-host run` process: a shard of the partitions (`--shard I/N`) or a
shard of one phase of a dedup step (`--phase P --shard I/N`). Inside it, curator-host runs
every stage's workers on the cores it is given (`--workers`), so a task reserves:

- `num_cpus`: the cores given to the process (`--workers` is set to the same number);
- `num_gpus`: the GPU stages' needs. `gpus: g` counts as is; `gpu_memory_gb: m` becomes the
  share m / (memory of one card), rounded *up* to Ray's granularity (0.0001) and never
  below it: a small request on a very large card stays a real reservation (rounding it to
  zero would let Ray put any number of such tasks on one card);
- `memory`: what the host reserves for its workers (the largest per-worker reservation
  times the cores, plus the host's own 256 MiB), or a dedup phase's planned peak.
"""

import math

GPU_QUANTUM = 1e-4
HOST_MIB = 256
MIB = 1 << 20

# Phases of a dedup step, in order, and whether their shards own partitions (docs, output:
# `--shards`) or LSH passes (buckets: `--bucket-shards`); components is one task.
DEDUP_PHASES = ("docs", "buckets", "components", "output")


class PolicyError(Exception):
    """A pipeline this driver cannot schedule as asked."""


def gpu_fraction(gpu_memory_gb, card_gb):
    """The share of one card that `gpu_memory_gb` is, rounded up to GPU_QUANTUM, in
    [GPU_QUANTUM, 1]."""
    if card_gb is None or card_gb <= 0:
        raise PolicyError("a stage asks for gpu_memory_gb: pass --gpu-card-gb (the memory of one GPU of the cluster's nodes)")
    quanta = math.ceil(gpu_memory_gb / card_gb / GPU_QUANTUM - 1e-9)
    return min(max(quanta, 1), round(1 / GPU_QUANTUM)) * GPU_QUANTUM


def num_gpus(stages, card_gb):
    """GPUs a task running `stages` reserves: whole GPUs plus shares, a total above 1 rounded
    up to whole cards (Ray takes fractions only below one)."""
    total = 0.0
    for s in stages:
        r = s.get("resources", {})
        if r.get("gpus") is not None:
            total += float(r["gpus"])
        elif r.get("gpu_memory_gb"):
            total += gpu_fraction(float(r["gpu_memory_gb"]), card_gb)
    total = round(total, 4)
    return float(math.ceil(total)) if total > 1 else total


def task_resources(report, cpus, card_gb=None, phase=None, tasks=1):
    """Ray resources of one task of `phase` (None: a shard of a pipeline without dedup), one of
    `tasks` tasks of that phase."""
    if cpus <= 0:
        raise PolicyError("--cpus-per-task must be positive")
    stages = report.get("stages", [])
    per_worker = max([s.get("reserved_mb_per_worker", 0) for s in stages] + [0])
    memory = (per_worker * math.ceil(cpus) + HOST_MIB) * MIB
    gpus = num_gpus(stages, card_gb)
    if phase in ("buckets", "components"):
        # No stage runs in these phases; the step's own phases take what the plan says.
        gpus = 0.0
        plan = report.get("dedup", {}).get("plan", {})
        peak = int(plan.get("peak_bytes", 0))
        shard = plan.get("bucket_shard")
        if phase == "buckets" and shard:
            # A semantic step's bucket shards split the fit sample between them.
            peak = int(shard["fixed_bytes"]) + -(-int(shard["split_bytes"]) // max(1, tasks))
        memory = max(memory, peak + HOST_MIB * MIB)
    return {"num_cpus": cpus, "num_gpus": gpus, "memory": int(memory)}


def together(report, phase):
    """Whether the tasks of `phase` must run at the same time: a semantic step's bucket
    shards fit k-means together, round by round (the driver reserves them as one placement
    group)."""
    return phase == "buckets" and (report.get("dedup") or {}).get("method") == "semantic"


def steps(report, shards, bucket_shards):
    """The pipeline as a list of steps run one after another, each a list of tasks run in
    parallel: (phase or None, [curator-host run arguments after the pipeline])."""
    if shards < 1 or bucket_shards < 1:
        raise PolicyError("--shards and --bucket-shards must be at least 1")
    dedup = report.get("dedup")
    if dedup is None:
        return [(None, [["--shard", f"{i}/{shards}"] for i in range(shards)])]
    out = []
    for phase in DEDUP_PHASES:
        n = {"docs": shards, "buckets": bucket_shards, "components": 1, "output": shards}[phase]
        if phase == "components":
            out.append((phase, [["--phase", phase]]))
        else:
            out.append((phase, [["--phase", phase, "--shard", f"{i}/{n}"] for i in range(n)]))
    return out
