"""The Ray side: each step's tasks submitted with their resources, retried on failure or
node loss, progress printed as they finish, then `curator-host merge`.

Every task is idempotent on the curator side (a shard skips the partitions its journal
records, a dedup phase skips what its markers record), so Ray may rerun one on another node
after a node dies. The `curator-host` process of a task dies with the Ray worker that
started it (PR_SET_PDEATHSIG), so a lost node's shard never runs twice at once.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import curator_ray
from curator_ray import policy

PR_SET_PDEATHSIG = 1


class ShardFailed(Exception):
    """A curator-host process that exited non-zero (retried)."""

    def __init__(self, argv, code, log):
        super().__init__(f"{' '.join(argv)} exited with {code}")
        self.argv, self.code, self.log = argv, code, log

    def __reduce__(self):
        return (ShardFailed, (self.argv, self.code, self.log))


class ShardInvalid(ShardFailed):
    """curator-host refused the plan (exit code 2): retrying cannot help."""

    def __reduce__(self):
        return (ShardInvalid, (self.argv, self.code, self.log))


def _die_with_parent():
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def resolve(curator):
    """The binary to run on this node: `curator` as given when it is a path or on PATH, else
    the one the `curator-host` wheel installed into this Python environment (a Ray
    `runtime_env` with `pip: [curator_host-….whl]` installs it on every node)."""
    if os.sep in curator or shutil.which(curator):
        return curator
    installed = os.path.join(sys.prefix, "bin", curator)
    return installed if os.access(installed, os.X_OK) else curator


def run_curator(argv, env=None):
    """Run one curator-host command to completion; its timing and the tail of its output."""
    started = time.time()
    argv = [resolve(argv[0])] + list(argv[1:])
    p = subprocess.run(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=_die_with_parent,
    )
    log = (p.stdout[-3000:] + p.stderr[-6000:]).strip()
    if p.returncode == 2:
        raise ShardInvalid(argv, p.returncode, log)
    if p.returncode != 0:
        raise ShardFailed(argv, p.returncode, log)
    return {"started": started, "finished": time.time(), "node": os.uname().nodename, "pid": os.getpid(), "log": p.stdout[-2000:]}


def plan_report(curator, pipeline, plugins):
    """`curator-host plan --json` of the pipeline, on this (the driver's) machine."""
    argv = [resolve(curator), "plan", pipeline, "--json"] + [a for d in plugins for a in ("--plugins", d)]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise policy.PolicyError(f"{' '.join(argv)} failed:\n{p.stderr.strip()}")
    return json.loads(p.stdout)


def shard_partitions(curator, pipeline, plugins, shard_args):
    """The partitions a shard owns, as `run --dry-run` lists them (for failure reports)."""
    argv = [resolve(curator), "run", pipeline, "--dry-run"] + shard_args + [a for d in plugins for a in ("--plugins", d)]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return [line.strip() for line in p.stdout.splitlines() if line.strip().startswith("partition ")]


def card_memory_gb():
    """The memory of the first GPU here (nvidia-smi), or None."""
    try:
        p = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            timeout=20,
        )
        return int(p.stdout.split()[0]) / 1024 if p.returncode == 0 and p.stdout.strip() else None
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


# How long a phase whose tasks run together waits for the cluster to have room for all.
GANG_WAIT_S = 600


def gang(res, n, label, out):
    """A placement group of `n` bundles of `res`, once the cluster has reserved them all: the
    tasks of a phase that must run at the same time start together, or not at all."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    bundle = {"CPU": res["num_cpus"], "memory": res["memory"]}
    if res["num_gpus"]:
        bundle["GPU"] = res["num_gpus"]
    group = placement_group([dict(bundle) for _ in range(n)], strategy="SPREAD")
    try:
        ray.get(group.ready(), timeout=GANG_WAIT_S)
    except ray.exceptions.GetTimeoutError:
        remove_placement_group(group)
        raise ShardFailed(
            ["placement_group"],
            1,
            f"{label}: the cluster has no room for its {n} tasks at once ({bundle} each) after {GANG_WAIT_S} s; "
            "a semantic dedup step's bucket shards fit k-means together: use fewer --bucket-shards",
        ) from None
    print(f"[curator-ray] {label}: {n} task(s) reserved together (one placement group)", file=out, flush=True)
    return group


def run(
    pipeline,
    address=None,
    shards=2,
    bucket_shards=None,
    curator="curator-host",
    plugins=(),
    cpus_per_task=1.0,
    gpu_card_gb=None,
    max_retries=3,
    warm=True,
    out=sys.stdout,
):
    """Run `pipeline` on the Ray cluster at `address` (None: start a local one, and stop it
    after). Returns the merged summary; raises ShardFailed naming the shard that kept failing.

    `warm`: run the tasks on warm workers (`warm.Pool`: an actor per slot, each keeping a
    `curator-host serve`), except the tasks of a phase that must run together (a placement
    group of plain tasks); otherwise each task is a Ray task starting its own `curator-host`."""
    import ray
    from ray.util.placement_group import remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from curator_ray import warm as warm_workers

    pipeline = os.path.abspath(pipeline)
    plugins = [os.path.abspath(d) for d in plugins]
    report = plan_report(curator, pipeline, plugins)
    if gpu_card_gb is None and any(s.get("resources", {}).get("gpu_memory_gb") for s in report.get("stages", [])):
        gpu_card_gb = card_memory_gb()
    plan = policy.steps(report, shards, bucket_shards or shards)
    started_here = not ray.is_initialized() and address is None
    if not ray.is_initialized():
        # The package goes with the job: the nodes need not have it installed.
        env = {"py_modules": [os.path.dirname(curator_ray.__file__)]}
        ray.init(address=address, logging_level="WARNING", log_to_driver=False, runtime_env=env)
    remote = ray.remote(run_curator)
    base = [curator, "run", pipeline] + [a for d in plugins for a in ("--plugins", d)]
    timings = []
    pools = {}  # warm workers by resource shape, kept while phases ask for the same shape
    t0 = time.time()
    try:
        for phase, tasks in plan:
            res = policy.task_resources(report, cpus_per_task, gpu_card_gb, phase, tasks=len(tasks))
            label = phase or "shards"
            cpus = res["num_cpus"]
            workers = str(max(1, int(cpus)))
            print(
                f"[curator-ray] {label}: {len(tasks)} task(s), each num_cpus={cpus} num_gpus={res['num_gpus']} memory={res['memory'] >> 20} MiB",
                file=out,
                flush=True,
            )
            argvs = [base + args + ["--workers", workers] for args in tasks]
            done = [0]

            def finished(i, r, submitted):
                done[0] += 1
                timings.append({"phase": label, "args": tasks[i], "submitted": submitted, "received": time.time(), **r})
                print(
                    f"[curator-ray] {label}: {done[0]}/{len(tasks)} done ({' '.join(tasks[i])} on {r['node']}, {r['finished'] - r['started']:.2f}s)",
                    file=out,
                    flush=True,
                )

            def lost(i, cause):
                shard = " ".join(tasks[i])
                parts = shard_partitions(curator, pipeline, plugins, tasks[i]) if "--shard" in tasks[i] else []
                return ShardFailed(
                    argvs[i],
                    getattr(cause, "code", 1),
                    f"{label} task `{shard}` failed after {max_retries + 1} attempt(s)"
                    + (f"; it owns:\n  " + "\n  ".join(parts) if parts else "")
                    + f"\nits log:\n{getattr(cause, 'log', str(cause))}",
                )

            together = policy.together(report, phase) and len(tasks) > 1
            if warm and not together:
                key = warm_workers.shape(res)
                for other in [k for k in pools if k != key]:
                    pools.pop(other).kill()  # their reservations are this phase's room
                want = min(len(tasks), max(1, warm_workers.capacity(res, ray.nodes())))
                if key in pools:
                    pools[key].grow(want)
                else:
                    pools[key] = warm_workers.Pool(res, curator, want)
                    print(f"[curator-ray] {label}: {want} warm worker(s) (curator-host serve)", file=out, flush=True)
                try:
                    pools[key].run(argvs, max_retries, finished)
                except warm_workers.Lost as e:
                    raise lost(e.index, e.cause) from None
                continue
            for p in pools.values():
                p.kill()
            pools.clear()
            opts = dict(res, max_retries=max_retries, retry_exceptions=[ShardFailed])
            group = gang(res, len(tasks), label, out) if together else None
            pending = {}
            for i, argv in enumerate(argvs):
                if group is not None:
                    opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=i)
                pending[remote.options(**opts).remote(argv)] = (i, time.time())
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                i, submitted = pending.pop(ready[0])
                try:
                    r = ray.get(ready[0])
                except Exception as e:  # the task's last attempt failed
                    for other in pending:
                        ray.cancel(other, force=True)
                    if group is not None:
                        remove_placement_group(group)
                    raise lost(i, getattr(e, "cause", None) or e) from None
                finished(i, r, submitted)
            if group is not None:
                remove_placement_group(group)
        output = report["output"]
        merged = subprocess.run([curator, "merge", output], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if merged.returncode != 0:
            raise ShardFailed([curator, "merge", output], merged.returncode, merged.stderr.strip())
        print(f"[curator-ray] {merged.stdout.strip()} in {time.time() - t0:.2f}s", file=out, flush=True)
        return {"merge": merged.stdout.strip(), "elapsed_s": time.time() - t0, "tasks": timings}
    finally:
        for p in pools.values():
            p.kill()
        # Never stop a cluster this driver did not start.
        if started_here:
            ray.shutdown()
