"""Run curator pipelines from Python: `Pipeline` builds the same pipeline file a CLI user
writes, runs it with `curator-host` (the binary the curator-host wheel installs, or one on
PATH), and returns the run's report, whose outputs open as pyarrow tables or polars frames."""

from .pipeline import Pipeline, PipelineError, Report, host_binary

__all__ = ["Pipeline", "PipelineError", "Report", "host_binary"]
