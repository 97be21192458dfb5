"""curator-ray on a real Ray cluster of several nodes on this machine (loopback only): the
quickstart pipeline, a fuzzy dedup pipeline (also when a worker node dies mid-run, with warm
workers and with a Ray task per shard) and a semantic dedup pipeline (its bucket shards
reserved together) give what one machine gives.

Needs CURATOR (the curator-host binary), CURATOR_TEST_PLUGINS (plugin directories, colon-
separated) and CURATOR_TEST_EXAMPLES (the repository's examples/); the Rust e2e test `ray`
sets them.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import ray.cluster_utils

from curator_ray import warm

CURATOR = os.environ.get("CURATOR", "")
PLUGINS = [d for d in os.environ.get("CURATOR_TEST_PLUGINS", "").split(":") if d]
EXAMPLES = os.environ.get("CURATOR_TEST_EXAMPLES", "")
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plugin_args():
    return [a for d in PLUGINS for a in ("--plugins", d)]


def manifest(out):
    with open(os.path.join(out, "_manifest.json")) as f:
        return sorted((x["path"], x["checksum"]) for x in json.load(f)["files"])


def duplicates(out):
    """The bytes of `_duplicates/` (written deterministically: equal content, equal bytes)."""
    with open(os.path.join(out, "_duplicates", "part-00000.parquet"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def curator_ray(args, curator=CURATOR, **kw):
    env = {**os.environ, "PYTHONPATH": PACKAGE}
    argv = [sys.executable, "-m", "curator_ray", "run"] + args + ["--curator", curator] + plugin_args()
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)


class RayCluster(unittest.TestCase):
    def setUp(self):
        if not (CURATOR and PLUGINS and EXAMPLES):
            self.fail("set CURATOR, CURATOR_TEST_PLUGINS and CURATOR_TEST_EXAMPLES (the e2e test `ray` does)")
        self.dir = tempfile.mkdtemp(prefix="curator-ray-")
        # Warm workers note each request they start here and pause, in the test that takes a
        # node away while one runs (the nodes' processes inherit the environment).
        self.started = os.path.join(self.dir, "started")
        os.makedirs(self.started)
        if "warm_workers" in self._testMethodName:
            os.environ[warm.TEST_STARTED] = self.started
        else:
            os.environ.pop(warm.TEST_STARTED, None)
        # The head takes no tasks; two worker nodes of one core each.
        self.cluster = ray.cluster_utils.Cluster(
            initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 100 << 20}
        )
        self.nodes = [self.cluster.add_node(num_cpus=1, object_store_memory=100 << 20) for _ in range(2)]
        self.cluster.wait_for_nodes()

    def tearDown(self):
        os.environ.pop(warm.TEST_STARTED, None)
        self.cluster.shutdown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def single(self, pipeline):
        subprocess.run([CURATOR, "run", pipeline] + plugin_args(), check=True, capture_output=True)

    def test_quickstart_through_ray_equals_one_machine(self):
        shutil.copytree(os.path.join(EXAMPLES, "quickstart", "data"), os.path.join(self.dir, "data"))
        with open(os.path.join(EXAMPLES, "quickstart", "pipeline.yaml")) as f:
            yaml = f.read()
        for name in ("single", "ray"):
            with open(os.path.join(self.dir, f"{name}.yaml"), "w") as f:
                f.write(yaml.replace("path: out ", f"path: {name} "))
        self.single(os.path.join(self.dir, "single.yaml"))
        p = curator_ray([os.path.join(self.dir, "ray.yaml"), "--address", self.cluster.address, "--shards", "3"])
        out, err = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, out + err)
        self.assertIn("merged 3 shard(s)", out)
        self.assertIn("shards: 2 warm worker(s)", out, "one per node: the default")
        self.assertEqual(manifest(os.path.join(self.dir, "ray")), manifest(os.path.join(self.dir, "single")))
        # The driver left the cluster it did not start running.
        probe = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address='{self.cluster.address}'); print(ray.cluster_resources()['CPU'])"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(probe.stdout.strip().splitlines()[-1], "2.0", probe.stderr)

    def fuzzy_pipelines(self):
        for f in ("shard-000.jsonl", "shard-001.jsonl"):
            os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
            shutil.copy(os.path.join(EXAMPLES, "dedup", "data", f), os.path.join(self.dir, "data", f))
        with open(os.path.join(EXAMPLES, "cluster", "pipeline-dedup.yaml")) as f:
            yaml = f.read().replace("../dedup/data", "data")
        for name in ("single", "ray"):
            with open(os.path.join(self.dir, f"{name}.yaml"), "w") as f:
                f.write(yaml.replace("path: out ", f"path: {name} "))
        self.single(os.path.join(self.dir, "single.yaml"))

    def lose_a_node_while_two_tasks_run(self, p):
        deadline = time.time() + 120
        while len(os.listdir(self.started)) < 2 and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        self.assertEqual(len(os.listdir(self.started)), 2, "both docs tasks started")
        self.cluster.remove_node(self.nodes[0], allow_graceful=False)
        out, err = p.communicate(timeout=600)
        self.assertEqual(p.returncode, 0, out + err)
        print(out, file=sys.stderr)
        self.assertGreaterEqual(len(os.listdir(self.started)), 2 + 2 + 1 + 2 + 1, "the lost task ran again")
        self.assertEqual(duplicates(os.path.join(self.dir, "ray")), duplicates(os.path.join(self.dir, "single")))
        self.assertEqual(manifest(os.path.join(self.dir, "ray")), manifest(os.path.join(self.dir, "single")))
        return out

    def test_fuzzy_dedup_through_ray_tasks_survives_losing_a_node(self):
        self.fuzzy_pipelines()
        # Every task's curator-host starts slowly, so that a node dies with a task on it.
        slow = os.path.join(self.dir, "slow-curator")
        with open(slow, "w") as f:
            f.write(
                "#!/usr/bin/env bash\n"
                f'if [ "$1" = run ] && [[ " $* " != *" --dry-run "* ]]; then touch "{self.started}/$$"; sleep 2; fi\n'
                f'exec "{CURATOR}" "$@"\n'
            )
        os.chmod(slow, 0o755)
        p = curator_ray([os.path.join(self.dir, "ray.yaml"), "--address", self.cluster.address, "--shards", "2", "--cold"], curator=slow)
        out = self.lose_a_node_while_two_tasks_run(p)
        self.assertNotIn("warm worker", out)

    def test_fuzzy_dedup_on_warm_workers_survives_losing_a_node(self):
        # Each warm worker notes a request and pauses before sending it (warm.TEST_STARTED).
        self.fuzzy_pipelines()
        p = curator_ray([os.path.join(self.dir, "ray.yaml"), "--address", self.cluster.address, "--shards", "2"])
        out = self.lose_a_node_while_two_tasks_run(p)
        self.assertIn("docs: 2 warm worker(s)", out)

    def test_warm_workers_that_cannot_start_are_reported_not_retried_forever(self):
        shutil.copytree(os.path.join(EXAMPLES, "quickstart", "data"), os.path.join(self.dir, "data"))
        with open(os.path.join(EXAMPLES, "quickstart", "pipeline.yaml")) as f:
            yaml = f.read().replace("path: out ", "path: ray ")
        with open(os.path.join(self.dir, "ray.yaml"), "w") as f:
            f.write(yaml)
        broken = os.path.join(self.dir, "no-serve-curator")
        with open(broken, "w") as f:
            f.write('#!/usr/bin/env bash\nif [ "$1" = serve ]; then echo "cannot serve here" >&2; exit 3; fi\n' f'exec "{CURATOR}" "$@"\n')
        os.chmod(broken, 0o755)
        p = curator_ray([os.path.join(self.dir, "ray.yaml"), "--address", self.cluster.address, "--shards", "2", "--max-retries", "1"], curator=broken)
        out, err = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 1, out + err)
        self.assertIn("cannot serve here", err)

    def test_semantic_dedup_through_ray_fits_kmeans_across_nodes(self):
        # Seeded unit vectors around a few centres, a near-copy of every fifth, in three files.
        import random

        rng = random.Random(7)
        centres = [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(10)]

        def unit(v):
            n = sum(x * x for x in v) ** 0.5
            return [x / n for x in v]

        lines = []
        for i in range(240):
            v = unit([c + 0.3 * rng.uniform(-1, 1) for c in centres[i % 10]])
            lines.append(json.dumps({"id": f"d{i:03}", "text": f"document {i}", "embedding": v}))
            if i % 5 == 2:
                lines.append(json.dumps({"id": f"c{i:03}", "text": f"copy {i}", "embedding": unit([x + 0.01 * rng.uniform(-1, 1) for x in v])}))
        os.makedirs(os.path.join(self.dir, "data"))
        for k in range(3):
            with open(os.path.join(self.dir, "data", f"part-{k}.jsonl"), "w") as f:
                f.write("\n".join(lines[k::3]) + "\n")
        for name in ("single", "ray"):
            with open(os.path.join(self.dir, f"{name}.yaml"), "w") as f:
                f.write(
                    "source: {path: data}\nbatch_size: 16\nstages:\n"
                    "  - dedup: {method: semantic, n_clusters: 12, fit_fraction: 0.8, device: cpu}\n"
                    f"sink: {{path: {name}}}\n"
                )
        self.single(os.path.join(self.dir, "single.yaml"))
        p = curator_ray([os.path.join(self.dir, "ray.yaml"), "--address", self.cluster.address, "--shards", "3", "--bucket-shards", "2"])
        out, err = p.communicate(timeout=600)
        self.assertEqual(p.returncode, 0, out + err)
        self.assertIn("buckets: 2 task(s) reserved together", out)
        self.assertEqual(duplicates(os.path.join(self.dir, "ray")), duplicates(os.path.join(self.dir, "single")))
        self.assertEqual(manifest(os.path.join(self.dir, "ray")), manifest(os.path.join(self.dir, "single")))


if __name__ == "__main__":
    unittest.main()
