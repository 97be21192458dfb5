"""1 vs 2 Ray worker nodes (one core each) on the same input, through curator-ray, with warm
workers (an actor per slot keeping `curator-host serve`) and with a Ray task per shard (cold).

    python3 python/curator-ray/bench.py --curator target/release/curator-host \
        --plugins target/dist/plugins [--copies 16] [--shards 8]

Each worker node is pinned to its own core (its raylet and the processes it starts, so
curator-host sees one usable core). Writes a table: wall time of the shards (submit of the first to result of the last), the
scaling ratio against one node, and the scheduling overhead per task: the time the nodes'
cores were not running a curator-host process, per task ((wall x nodes - sum of task run
times) / tasks). Also times the same pipeline as one `curator-host run --workers 1` without
Ray, as the baseline. Modes and node counts alternate: cold 1, warm 1, cold 2, warm 2.
"""

import argparse
import re
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ray  # noqa: E402
import ray.cluster_utils  # noqa: E402

from curator_ray import driver  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")


def corpus(dir, copies):
    """`copies` files, each the dedup example's two shards 10 times over (real text)."""
    os.makedirs(dir)
    texts = []
    for f in ("shard-000.jsonl", "shard-001.jsonl"):
        with open(os.path.join(EXAMPLES, "dedup", "data", f)) as fh:
            texts.append(fh.read())
    for k in range(copies):
        with open(os.path.join(dir, f"part-{k:03}.jsonl"), "w") as out:
            for _ in range(10):
                for t in texts:
                    out.write(t)
    return sum(os.path.getsize(os.path.join(dir, f)) for f in os.listdir(dir))


def pin(node, core):
    """A node of one core: its raylet and every process it has started (or will: children
    inherit the affinity) run on `core` only, curator-host's workers included."""
    import psutil

    for infos in node.all_processes.values():
        for info in infos:
            p = psutil.Process(info.process.pid)
            for q in [p] + p.children(recursive=True):
                q.cpu_affinity([core])


def pipeline(dir, name):
    with open(os.path.join(EXAMPLES, "presets", "nemo-english-heuristics-stages.yaml")) as f:
        yaml = f.read()
    yaml = yaml.replace("path: ../quickstart/data", f"path: {dir}/data")
    yaml = re.sub(r"(?m)^(sink:\n  path: ).*$", lambda m: f"{m.group(1)}{dir}/{name}", yaml)
    path = os.path.join(dir, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--curator", required=True)
    ap.add_argument("--plugins", action="append", default=[])
    ap.add_argument("--copies", type=int, default=64)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--max-retries", type=int, default=3)
    a = ap.parse_args()
    curator = os.path.abspath(a.curator)
    plugins = [os.path.abspath(p) for p in a.plugins]
    dir = tempfile.mkdtemp(prefix="curator-ray-bench-")
    try:
        size = corpus(os.path.join(dir, "data"), a.copies)
        base = pipeline(dir, "baseline")
        t = time.time()
        subprocess.run(
            [curator, "run", base, "--workers", "1"] + [x for p in plugins for x in ("--plugins", p)],
            check=True,
            capture_output=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {0}),
        )
        baseline = time.time() - t
        rows = []
        for nodes, mode in [(n, m) for n in (1, 2) for m in ("cold", "warm")]:
            cluster = ray.cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 100 << 20, "include_dashboard": False})
            for k in range(nodes):
                pin(cluster.add_node(num_cpus=1, object_store_memory=100 << 20), k % os.cpu_count())
            cluster.wait_for_nodes()
            try:
                path = pipeline(dir, f"ray{nodes}-{mode}")
                quiet = open(os.devnull, "w")
                try:
                    r = driver.run(
                        path,
                        address=cluster.address,
                        shards=a.shards,
                        curator=curator,
                        plugins=plugins,
                        out=quiet,
                        max_retries=a.max_retries,
                        warm=mode == "warm",
                    )
                except driver.ShardFailed as e:
                    sys.exit(f"{nodes} node(s): {e.log}")
                tasks = r["tasks"]
                wall = max(x["received"] for x in tasks) - min(x["submitted"] for x in tasks)
                busy = sum(x["finished"] - x["started"] for x in tasks)
                # Per worker process: the wait from submission (first task) or from its
                # previous task's end (the rest) to the start of its curator-host.
                gaps = []
                for pid in {x["pid"] for x in tasks}:
                    mine = sorted((x for x in tasks if x["pid"] == pid), key=lambda x: x["started"])
                    gaps.append(mine[0]["started"] - mine[0]["submitted"])
                    gaps.extend(b["started"] - a["finished"] for a, b in zip(mine, mine[1:]))
                rows.append((mode, nodes, wall, sum(gaps) / len(gaps), busy / len(tasks), (wall * nodes - busy) / len(tasks)))
            finally:
                ray.shutdown()
                cluster.shutdown()
        print(f"input: {size / 1e6:.0f} MB in {a.copies} files, NeMo English heuristics as 28 stages, {a.shards} shards, 1 core per node")
        print(f"baseline (curator-host run --workers 1 on one core, no Ray): {baseline:.2f} s")
        print(f"{'mode':>5} {'nodes':>5} {'wall s':>8} {'x 1 node':>9} {'x baseline':>11} {'task s':>8} {'sched ms/task':>14} {'idle ms/task':>13}")
        one = {mode: wall for mode, nodes, wall, *_ in rows if nodes == 1}
        for mode, nodes, wall, sched, task, idle in rows:
            print(
                f"{mode:>5} {nodes:>5} {wall:>8.2f} {one[mode] / wall:>9.2f} {baseline / wall:>11.2f} {task:>8.2f} {sched * 1000:>14.0f} {idle * 1000:>13.0f}"
            )
    finally:
        shutil.rmtree(dir, ignore_errors=True)


if __name__ == "__main__":
    main()
