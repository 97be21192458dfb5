"""curator-ray on a real Ray cluster of several nodes on this machine (loopback only): the
quickstart pipeline and a fuzzy dedup pipeline give what one machine gives, also when a
worker node dies mid-run.

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

CURATOR = os.environ.get("CURATOR", "")
PLUGINS = [d for d in os.environ.get("CURATOR_TEST_PLUGINS", "").split(":") if d]
EXAMPLES = os.environ.get("CURATOR_TEST_EXAMPLES", "")
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def plugin_args():
    return [a for d in PLUGINS for a in ("--plugins", d)]


def manifest(out):
    with open(os.path.join(out, "_manifest.json")) as f:
        return sorted((x["path"], x["sha256"]) for x in json.load(f)["files"])


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
        # The head takes no tasks; two worker nodes of one core each.
        self.cluster = ray.cluster_utils.Cluster(
            initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 100 << 20}
        )
        self.nodes = [self.cluster.add_node(num_cpus=1, object_store_memory=100 << 20) for _ in range(2)]
        self.cluster.wait_for_nodes()

    def tearDown(self):
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
        self.assertEqual(manifest(os.path.join(self.dir, "ray")), manifest(os.path.join(self.dir, "single")))
        # The driver left the cluster it did not start running.
        probe = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address='{self.cluster.address}'); print(ray.cluster_resources()['CPU'])"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(probe.stdout.strip().splitlines()[-1], "2.0", probe.stderr)

    def test_fuzzy_dedup_through_ray_survives_losing_a_node(self):
        for f in ("shard-000.jsonl", "shard-001.jsonl"):
            os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
            shutil.copy(os.path.join(EXAMPLES, "dedup", "data", f), os.path.join(self.dir, "data", f))
        with open(os.path.join(EXAMPLES, "cluster", "pipeline-dedup.yaml")) as f:
            yaml = f.read().replace("../dedup/data", "data")
        for name in ("single", "ray"):
            with open(os.path.join(self.dir, f"{name}.yaml"), "w") as f:
                f.write(yaml.replace("path: out ", f"path: {name} "))
        self.single(os.path.join(self.dir, "single.yaml"))
        # Every task's curator-host starts slowly, so that a node dies with a task on it.
        started = os.path.join(self.dir, "started")
        os.makedirs(started)
        slow = os.path.join(self.dir, "slow-curator")
        with open(slow, "w") as f:
            f.write(
                "#!/usr/bin/env bash\n"
                f'if [ "$1" = run ] && [[ " $* " != *" --dry-run "* ]]; then touch "{started}/$$"; sleep 2; fi\n'
                f'exec "{CURATOR}" "$@"\n'
            )
        os.chmod(slow, 0o755)
        p = curator_ray([os.path.join(self.dir, "ray.yaml"), "--address", self.cluster.address, "--shards", "2"], curator=slow)
        deadline = time.time() + 120
        while len(os.listdir(started)) < 2 and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        self.assertEqual(len(os.listdir(started)), 2, "both docs tasks started")
        self.cluster.remove_node(self.nodes[0], allow_graceful=False)
        out, err = p.communicate(timeout=600)
        self.assertEqual(p.returncode, 0, out + err)
        print(out, file=sys.stderr)
        self.assertGreaterEqual(len(os.listdir(started)), 2 + 2 + 1 + 2 + 1, "the lost task ran again")
        self.assertEqual(duplicates(os.path.join(self.dir, "ray")), duplicates(os.path.join(self.dir, "single")))
        self.assertEqual(manifest(os.path.join(self.dir, "ray")), manifest(os.path.join(self.dir, "single")))


if __name__ == "__main__":
    unittest.main()
