"""`curator-ray run PIPELINE.yaml --address ...`"""

import argparse
import sys

from curator_ray import driver, policy


def main(argv=None):
    ap = argparse.ArgumentParser(prog="curator-ray", description="Run a curator pipeline on a Ray cluster.")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run PIPELINE's shards (and its dedup step's phases) as Ray tasks, then merge")
    r.add_argument("pipeline")
    r.add_argument("--address", help="the Ray cluster (e.g. auto, or ray://head:10001); default: start a local one for this run")
    r.add_argument("--shards", type=int, default=2, help="partition shards (docs and output phases too); default 2")
    r.add_argument("--bucket-shards", type=int, help="bucket shards of a dedup step: a fuzzy step's LSH passes, or a semantic step's k-means shards, which run together (default: --shards)")
    r.add_argument("--curator", default="curator-host", help="the curator-host binary, at the same path on every node")
    r.add_argument("--plugins", action="append", default=[], help="plugin directory (repeatable), on every node")
    r.add_argument("--cpus-per-task", type=float, default=1.0, help="cores of each task (its --workers); default 1")
    r.add_argument("--gpu-card-gb", type=float, help="memory of one GPU of the nodes, to turn gpu_memory_gb into num_gpus (default: this machine's nvidia-smi)")
    r.add_argument("--max-retries", type=int, default=3, help="reruns of a failed task or one lost with its node; default 3")
    r.add_argument(
        "--cold",
        action="store_true",
        help="a Ray task per shard, each starting its own curator-host (default: warm workers, an actor per slot keeping `curator-host serve`)",
    )
    a = ap.parse_args(argv)
    try:
        driver.run(
            a.pipeline,
            address=a.address,
            shards=a.shards,
            bucket_shards=a.bucket_shards,
            curator=a.curator,
            plugins=a.plugins,
            cpus_per_task=a.cpus_per_task,
            gpu_card_gb=a.gpu_card_gb,
            max_retries=a.max_retries,
            warm=not a.cold,
        )
    except policy.PolicyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except driver.ShardFailed as e:
        print(f"error: {e.log}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
