"""`Pipeline`: a pipeline file as a Python object.

    from curator import Pipeline

    p = Pipeline(source="data", sink="out", batch_size=256)
    p.stage("unicode_normalize", form="nfc")
    p.stage("word_count_filter", min_words=50)
    report = p.run(plugins=["plugins"])
    table = report.to_arrow()

The object holds exactly the mapping the YAML file holds (`to_dict()`); `to_yaml()` writes it
and `Pipeline.from_yaml()` reads one back, so a pipeline moves between Python and the CLI
unchanged. Relative paths resolve against the folder of the file the pipeline was loaded from
or saved to (as for the CLI), else against the current directory, as a Python user expects:
`run()` writes a temporary copy of the file there (never over the user's file). Checking is
the host's: `validate()` and `run()` give the file to `curator-host`, which checks it and every
stage's params against the plugins' schemas before reading any data, and a refusal raises
`PipelineError` with its message.
"""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

EXIT_INVALID = 2


class PipelineError(Exception):
    """curator-host refused the pipeline or the run failed; `code` is its exit status."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def host_binary(host: str = None) -> str:
    """The curator-host to run: `host` (or $CURATOR_HOST) when given, else the one on PATH,
    else the one the curator-host wheel installed into this environment."""
    host = host or os.environ.get("CURATOR_HOST")
    if host:
        return host
    found = shutil.which("curator-host")
    if found:
        return found
    installed = Path(sys.prefix) / "bin" / "curator-host"
    if os.access(installed, os.X_OK):
        return str(installed)
    raise PipelineError("curator-host not found: install the curator-host wheel, put it on PATH, or set CURATOR_HOST", 127)


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting the strings a YAML 1.1 reader (curator-host's among
    them) would read as booleans or null: `y`, `n`, `on`, `off`, … PyYAML leaves some bare."""


_AMBIGUOUS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ""}


def _str(dumper, value):
    style = '"' if value.lower() in _AMBIGUOUS else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _location(value, key: str) -> dict:
    if isinstance(value, (str, os.PathLike)):
        return {"path": os.fspath(value)}
    if isinstance(value, dict):
        return dict(value)
    raise TypeError(f"{key}: give a path or a mapping (as in the pipeline file), not {type(value).__name__}")


class Pipeline:
    """A pipeline: `source`, `stages`, `sink` and the file's other top-level keys (`name`,
    `batch_size`, `execution`, `trust`, `dedup`, …) as keyword arguments, spelled as in the file."""

    def __init__(self, source=None, sink=None, stages=None, **settings):
        self._doc = {}
        for key, value in settings.items():
            self._doc[key] = copy.deepcopy(value)
        if source is not None:
            self._doc["source"] = _location(source, "source")
        self._doc["stages"] = []
        for s in stages or []:
            if isinstance(s, str):
                self.stage(s)
            elif isinstance(s, (tuple, list)) and len(s) == 2:
                self.stage(s[0], **dict(s[1]))
            elif isinstance(s, dict):
                self._doc["stages"].append(copy.deepcopy(s))
            else:
                raise TypeError(f"stages: each is a plugin name, (name, params) or a mapping as in the pipeline file, not {s!r}")
        if sink is not None:
            self._doc["sink"] = _location(sink, "sink")
        self.path = None

    def stage(self, plugin: str, *, name: str = None, options: dict = None, **params) -> "Pipeline":
        """Add a stage: the plugin by name, its params as keyword arguments; `options` are the
        stage's other keys in the file (`resources`, `grants`, `batch_size`, `rejected`, …)."""
        entry = {"plugin": plugin}
        if name:
            entry["name"] = name
        if params:
            entry["params"] = copy.deepcopy(params)
        entry.update(copy.deepcopy(options or {}))
        self._doc["stages"].append(entry)
        return self

    def to_dict(self) -> dict:
        """The pipeline file's mapping."""
        order = ["name", "source", "batch_size", "stages", "dedup", "sink"]
        out = {k: copy.deepcopy(self._doc[k]) for k in order if k in self._doc}
        out.update({k: copy.deepcopy(v) for k, v in self._doc.items() if k not in out})
        return out

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)

    def save(self, path) -> Path:
        """Write the pipeline file; relative paths in it resolve against its folder."""
        path = Path(path)
        path.write_text(self.to_yaml(), encoding="utf-8")
        self.path = path
        return path

    @classmethod
    def from_yaml(cls, path_or_text) -> "Pipeline":
        """A pipeline from a file (a path) or from the text of one."""
        if isinstance(path_or_text, os.PathLike) or (isinstance(path_or_text, str) and "\n" not in path_or_text and Path(path_or_text).is_file()):
            path = Path(path_or_text)
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        else:
            path, doc = None, yaml.safe_load(path_or_text)
        if not isinstance(doc, dict):
            raise PipelineError(f"{path or 'pipeline'}: expected a mapping at the top", EXIT_INVALID)
        p = cls()
        p._doc = doc
        p._doc.setdefault("stages", [])
        p.path = path
        return p

    def __eq__(self, other) -> bool:
        return isinstance(other, Pipeline) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        stages = ", ".join(s.get("plugin", "?") for s in self._doc.get("stages", []))
        return f"Pipeline({self._doc.get('source', {}).get('path')!r} -> [{stages}] -> {self._doc.get('sink', {}).get('path')!r})"

    def _args(self, plugins, trust_dirs, workers) -> list:
        args = []
        for p in [plugins] if isinstance(plugins, (str, os.PathLike)) else plugins or []:
            args += ["--plugins", os.fspath(p)]
        for t in [trust_dirs] if isinstance(trust_dirs, (str, os.PathLike)) else trust_dirs or []:
            args += ["--trust-dir", os.fspath(t)]
        if workers is not None:
            args += ["--workers", str(workers)]
        return args

    def _file(self):
        """A temporary copy of the pipeline file (removed after), in the folder of the file it
        was loaded from or saved to, else in the current directory: relative paths resolve as
        they would there, and the user's own file (its comments) is never rewritten."""
        folder = self.path.parent if self.path is not None else Path.cwd()
        fd, name = tempfile.mkstemp(prefix=".curator-pipeline-", suffix=".yaml", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.to_yaml())
        return Path(name), True

    def validate(self, plugins=None, trust_dirs=None, host: str = None) -> str:
        """Check the pipeline as `curator-host run --dry-run` does (the file, each stage's
        params against its plugin's schema, grants, trust); the plan it prints, or
        PipelineError with the host's message."""
        path, temporary = self._file()
        try:
            done = subprocess.run(
                [host_binary(host), "run", str(path), "--dry-run", *self._args(plugins, trust_dirs, None)],
                capture_output=True,
                text=True,
            )
        finally:
            if temporary:
                path.unlink(missing_ok=True)
        if done.returncode != 0:
            raise PipelineError(_message(done.stderr, done.returncode), done.returncode)
        return done.stdout

    def run(self, plugins=None, trust_dirs=None, workers=None, host: str = None, quiet: bool = False, extra_args=()) -> "Report":
        """Run the pipeline with curator-host (its progress and table on this terminal, as the
        CLI shows them; `quiet` keeps them); the run's report."""
        path, temporary = self._file()
        argv = [host_binary(host), "run", str(path), *self._args(plugins, trust_dirs, workers), *extra_args]
        try:
            if quiet:
                done = subprocess.run(argv, capture_output=True, text=True)
                err = done.stderr
            else:
                done = subprocess.run(argv, stderr=subprocess.PIPE, text=True)
                sys.stderr.write(done.stderr)
                err = done.stderr
        finally:
            if temporary:
                path.unlink(missing_ok=True)
        if done.returncode != 0:
            raise PipelineError(_message(err, done.returncode), done.returncode)
        sink = self._doc.get("sink", {}).get("path")
        return Report.read(path.parent / sink if sink else None)


def _message(stderr: str, code: int) -> str:
    lines = [l for l in (stderr or "").splitlines() if l.strip()]
    errors = [l for l in lines if l.startswith("error")]
    return "\n".join(errors or lines[-5:]) or f"curator-host exited with {code}"


class Report:
    """A finished run: `summary` (the sink's `_summary.json`: documents in and out, per-stage
    counts and rates, outputs with checksums) and the output files."""

    def __init__(self, output: Path, summary: dict):
        self.output = output
        self.summary = summary

    @classmethod
    def read(cls, output) -> "Report":
        if output is None or "://" in str(output):
            return cls(output, {})
        output = Path(output)
        summary = output / "_summary.json"
        return cls(output, json.loads(summary.read_text()) if summary.exists() else {})

    @property
    def docs_in(self) -> int:
        return self.summary.get("docs_in", 0)

    @property
    def docs_out(self) -> int:
        return self.summary.get("docs_out", 0)

    @property
    def stages(self) -> list:
        return self.summary.get("stages", [])

    @property
    def files(self) -> list:
        """The output files, in the order the run wrote them."""
        return [self.output / o["path"] for o in self.summary.get("outputs", [])]

    def to_arrow(self):
        """The outputs as one pyarrow Table (JSONL or Parquet, compressed or not)."""
        import pyarrow as pa

        tables = [_read_arrow(f) for f in self.files]
        if not tables:
            return pa.table({})
        return pa.concat_tables(tables, promote_options="default")

    def to_polars(self):
        """The outputs as one polars DataFrame."""
        import polars as pl

        return pl.from_arrow(self.to_arrow())

    def __repr__(self) -> str:
        return f"Report({self.output}: {self.docs_in} in, {self.docs_out} out)"


def _read_arrow(path: Path):
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    name = path.name
    if name.endswith(".parquet"):
        return pq.read_table(path)
    if name.endswith(".gz") or name.endswith(".zst"):
        import pyarrow as pa

        codec = "gzip" if name.endswith(".gz") else "zstd"
        with pa.CompressedInputStream(pa.OSFile(str(path)), codec) as stream:
            return pj.read_json(stream)
    return pj.read_json(path)
