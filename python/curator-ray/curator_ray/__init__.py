"""Run curator pipelines on a Ray cluster.

`curator-host` does the work; this package only decides which `curator-host run` commands
(shards of a pipeline, phases of its dedup step) become Ray tasks, with what resources, and
runs them in order. See `policy` (pure: tasks and resources) and `driver` (Ray).
"""

__version__ = "0.1.0"
