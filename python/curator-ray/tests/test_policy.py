"""The driver's policy, without Ray: tasks per pipeline, resources per task."""

import unittest

from curator_ray import policy


def report(*stages, dedup=None):
    r = {"stages": [{"label": f"s{i}", "reserved_mb_per_worker": mb, "resources": res} for i, (mb, res) in enumerate(stages)]}
    if dedup:
        r["dedup"] = dedup
    return r


class Policy(unittest.TestCase):
    def test_gpu_memory_becomes_a_share_rounded_up_never_to_zero(self):
        self.assertAlmostEqual(policy.gpu_fraction(8, 80), 0.1)
        # NeMo Curator's bug: 1 GB on a 288 GB card must not round to 0 GPUs.
        self.assertEqual(policy.gpu_fraction(1, 288), 0.0035)
        self.assertEqual(policy.gpu_fraction(0.001, 288), policy.GPU_QUANTUM)
        self.assertEqual(policy.gpu_fraction(200, 80), 1.0)
        with self.assertRaises(policy.PolicyError):
            policy.gpu_fraction(8, None)

    def test_a_task_reserves_its_stages(self):
        r = report((256, {"cpus": 1}), (2048, {"cpus": 1, "gpu_memory_gb": 20}))
        res = policy.task_resources(r, 4, card_gb=80)
        self.assertEqual(res["num_cpus"], 4)
        self.assertEqual(res["num_gpus"], 0.25)
        self.assertEqual(res["memory"], (2048 * 4 + 256) << 20)
        two = report((256, {"gpus": 1}), (256, {"gpu_memory_gb": 40}))
        self.assertEqual(policy.task_resources(two, 1, card_gb=80)["num_gpus"], 2.0)
        cpu_only = report((256, {"cpus": 1}))
        self.assertEqual(policy.task_resources(cpu_only, 1)["num_gpus"], 0.0)

    def test_dedup_phases_take_their_planned_peak_and_no_gpu(self):
        r = report((256, {"gpu_memory_gb": 8}), dedup={"method": "fuzzy", "plan": {"peak_bytes": 10 << 30}})
        res = policy.task_resources(r, 1, card_gb=80, phase="buckets")
        self.assertEqual(res["num_gpus"], 0.0)
        self.assertEqual(res["memory"], (10 << 30) + (256 << 20))
        self.assertEqual(policy.task_resources(r, 1, card_gb=80, phase="docs")["num_gpus"], 0.1)
        # A semantic step's bucket shards each reserve their share of the fit, not the whole.
        shard = {"fixed_bytes": 1 << 30, "split_bytes": 8 << 30}
        sem = report((256, {}), dedup={"method": "semantic", "plan": {"peak_bytes": 9 << 30, "bucket_shard": shard}})
        self.assertEqual(policy.task_resources(sem, 1, phase="buckets", tasks=4)["memory"], (3 << 30) + (256 << 20))
        self.assertEqual(policy.task_resources(sem, 1, phase="components", tasks=1)["memory"], (9 << 30) + (256 << 20))

    def test_steps_cover_every_shard_and_phase_in_order(self):
        plain = policy.steps(report((256, {})), 3, 3)
        self.assertEqual(plain, [(None, [["--shard", "0/3"], ["--shard", "1/3"], ["--shard", "2/3"]])])
        d = policy.steps(report((256, {}), dedup={"method": "fuzzy"}), 2, 3)
        self.assertEqual([p for p, _ in d], ["docs", "buckets", "components", "output"])
        self.assertEqual([len(t) for _, t in d], [2, 3, 1, 2])
        self.assertEqual(d[2][1], [["--phase", "components"]])
        self.assertEqual(d[1][1][2], ["--phase", "buckets", "--shard", "2/3"])
        # A semantic step runs in the same phases; its bucket shards run together.
        sem = report((256, {}), dedup={"method": "semantic"})
        self.assertEqual([p for p, _ in policy.steps(sem, 2, 3)], ["docs", "buckets", "components", "output"])
        self.assertTrue(policy.together(sem, "buckets"))
        self.assertFalse(policy.together(sem, "docs") or policy.together(report((256, {}), dedup={"method": "fuzzy"}), "buckets"))


if __name__ == "__main__":
    unittest.main()
