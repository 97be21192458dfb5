"""Warm workers' placement arithmetic (no cluster)."""

import unittest

from curator_ray import warm

GIB = 1 << 30


def node(alive=True, **resources):
    return {"Alive": alive, "Resources": resources}


class Capacity(unittest.TestCase):
    def test_slots_are_counted_per_node_by_the_scarcest_resource(self):
        res = {"num_cpus": 2.0, "num_gpus": 0.0, "memory": 3 * GIB}
        nodes = [node(CPU=8.0, memory=8.0 * GIB), node(CPU=3.0, memory=64.0 * GIB), node(CPU=0.0, memory=4.0 * GIB)]
        # 8 cores hold 4, 8 GiB only 2; 3 cores hold 1 (a slot never spans nodes); no cores: 0.
        self.assertEqual(warm.capacity(res, nodes), 2 + 1 + 0)

    def test_gpu_shares_and_lost_nodes(self):
        res = {"num_cpus": 1.0, "num_gpus": 0.25, "memory": GIB}
        nodes = [node(CPU=16.0, GPU=2.0, memory=100.0 * GIB), node(alive=False, CPU=16.0, GPU=2.0, memory=100.0 * GIB), node(CPU=16.0, memory=100.0 * GIB)]
        self.assertEqual(warm.capacity(res, nodes), 8, "4 per card on the GPU node; the dead node and the CPU-only node hold none")

    def test_a_shape_is_what_a_task_reserves(self):
        a = {"num_cpus": 1.0, "num_gpus": 0.0, "memory": GIB}
        self.assertEqual(warm.shape(a), warm.shape(dict(a)))
        self.assertNotEqual(warm.shape(a), warm.shape({**a, "memory": 2 * GIB}))


if __name__ == "__main__":
    unittest.main()
