"""The four kinds of stage, as in the Rust SDK: `Filter` (keep or drop), `Map` (rewrite the
text), `Score` (NeMo Curator's ScoreFilter: score, keep by score, write the score) and `Stage`
(a whole batch in, any output out). Subclass one, declare params as annotated attributes
(`params.py`), and the manifest is derived from the class:

    class WordCount(Filter):
        \"\"\"Keeps documents with at least `min_words` words.\"\"\"
        name = "py_word_count"
        min_words: int = Param(50, min=0)

        def keep(self, text: str) -> bool:
            return len(text.split()) >= self.min_words

The same class runs in native CPython (`WordCount(min_words=3).run_texts([...])`, for its
unit tests) and, built by `curator-sdk build`, as a sandboxed WASM component in curator-host.
"""

import json
import re
import typing

from . import params as _params
from .batch import Batch, Column, Columns, Keep
from .errors import Failed, InvalidParams, classify

ABI = {"major": 0, "minor": 4}

_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")


class Directory:
    """A directory the stage asks the pipeline to grant: it appears in the sandbox at `/NAME`."""

    def __init__(self, name: str, writable: bool = False, doc: str = ""):
        self.name, self.writable, self.doc = name, writable, doc

    def manifest(self) -> dict:
        d = {"name": self.name}
        if self.writable:
            d["writable"] = True
        if self.doc:
            d["description"] = self.doc
        return d


class _Base:
    # What the manifest says; a subclass sets the ones it needs (ClassVar: not params).
    name: typing.ClassVar[str] = ""
    version: typing.ClassVar[str] = "0.1.0"
    description: typing.ClassVar[str] = ""
    license: typing.ClassVar[str] = ""
    cpus: typing.ClassVar[float] = 1.0
    memory_mb: typing.ClassVar[int] = 256
    batch_size: typing.ClassVar[typing.Optional[int]] = None
    directories: typing.ClassVar[list] = []
    input_columns: typing.ClassVar[list] = ["text"]
    output_columns: typing.ClassVar[list] = []

    def __init__(self, **params):
        for key, value in _params.bind(type(self), params).items():
            setattr(self, key, value)
        self.setup()

    @classmethod
    def from_json(cls, text: str) -> "_Base":
        try:
            given = json.loads(text) if text.strip() else {}
        except ValueError as e:
            raise InvalidParams(f"params: not JSON: {e}") from None
        if not isinstance(given, dict):
            raise InvalidParams("params: expected an object")
        return cls(**given)

    def setup(self) -> None:
        """Called once per instance, after the params are set (compile patterns, load data)."""

    def teardown(self) -> None:
        """Called once before the instance is dropped."""

    @classmethod
    def manifest(cls) -> dict:
        """The manifest, as the plugin file carries it."""
        if not _NAME.match(cls.name or ""):
            raise TypeError(f"{cls.__name__}.name = {cls.name!r}: set it to the stage's name (lowercase letters, digits, '_', '-')")
        doc = cls.description or (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        resources = {"cpus": float(cls.cpus), "memory_mb": int(cls.memory_mb)}
        m = {
            "name": cls.name,
            "version": cls.version,
            "description": " ".join(doc.split()),
            "license": cls.license,
            "abi": dict(ABI),
            "kind": "wasm",
            "resources": resources,
            "input_columns": list(cls.input_columns),
            "output_columns": list(cls.output_columns),
            "params_schema": _params.schema(cls),
            "permissions": {"directories": [d.manifest() for d in cls.directories]} if cls.directories else {},
        }
        if cls.batch_size:
            m["batch_size"] = int(cls.batch_size)
        if not m["license"]:
            del m["license"]
        if not m["description"]:
            del m["description"]
        return m

    @classmethod
    def manifest_json(cls) -> str:
        return json.dumps(cls.manifest(), separators=(",", ":"))

    def process_batch(self, batch: Batch):
        """One batch in, one output (`Keep`, `Columns` or a `Batch`) out."""
        raise NotImplementedError

    def run(self, batch: Batch):
        """`process_batch`, its failures turned into the stage error the host classes."""
        try:
            return self.process_batch(batch)
        except Exception as e:  # noqa: BLE001 - every failure is reported, classed
            raise classify(e) from e

    def run_texts(self, texts) -> list:
        """The texts this stage passes on, rewritten where it rewrites them (unit tests)."""
        texts = list(texts)
        batch = Batch.of({"id": [str(i) for i in range(len(texts))], "text": texts})
        out = self.run(batch)
        if isinstance(out, Keep):
            return [texts[i] for i in out.rows]
        if isinstance(out, Columns):
            new = {c.name: c for c in out.columns}
            column = new.get("text")
            now = column.values() if column is not None else texts
            rows = out.keep if out.keep is not None else range(len(texts))
            return [now[i] for i in rows]
        return out["text"]


class Filter(_Base):
    """Keeps or drops each document: implement `keep(text) -> bool`."""

    def keep(self, text: str) -> bool:
        raise NotImplementedError

    def process_batch(self, batch: Batch):
        keep = self.keep
        return Keep([i for i, t in enumerate(batch["text"]) if keep(t or "")])


class Map(_Base):
    """Rewrites each document's text: implement `map(text) -> str`."""

    output_columns: typing.ClassVar[list] = ["text"]

    def map(self, text: str) -> str:
        raise NotImplementedError

    def process_batch(self, batch: Batch):
        f = self.map
        return Columns([Column.of("text", [f(t or "") for t in batch["text"]], "utf8")])


class Score(_Base):
    """Scores each document and keeps it by its score, with NeMo Curator's ScoreFilter params
    (`score_field`: write the score (float64) there; `invert`; `filter`: false only writes the
    score). Implement `score(text) -> float` and `keep(score) -> bool` (NeMo's
    `score_document` and `keep_document`)."""

    score_field: typing.Optional[str] = _params.Param(None, doc="Write the score to this column (float64), as NeMo Curator's ScoreFilter `score_field`.")
    invert: bool = _params.Param(False, doc="Keep the documents the filter would drop, and drop the others.")
    filter: bool = _params.Param(True, doc="Drop documents; false: only write the score.")

    def score(self, text: str) -> float:
        raise NotImplementedError

    def keep(self, score: float) -> bool:
        raise NotImplementedError

    def process_batch(self, batch: Batch):
        score, keep = self.score, self.keep
        scores = [score(t or "") for t in batch["text"]]
        invert, filtering = self.invert, self.filter
        kept = [i for i, s in enumerate(scores) if not filtering or bool(keep(s)) != invert]
        if self.score_field is None:
            return Keep(kept)
        column = Column.of(self.score_field, [float(s) for s in scores], "float64")
        return Columns([column], keep=None if not filtering else kept)


class Stage(_Base):
    """A whole batch in, any output out: implement `process(batch)` and return `Keep(rows)`,
    `Columns({name: values}, keep=None)` or a new `Batch`."""

    def process(self, batch: Batch):
        raise NotImplementedError

    def process_batch(self, batch: Batch):
        out = self.process(batch)
        if isinstance(out, dict):
            out = Columns(out)
        if not isinstance(out, (Keep, Columns, Batch)):
            raise Failed(f"{type(self).__name__}.process returned {type(out).__name__}: return Keep, Columns, a dict of columns or a Batch")
        return out


KINDS = (Filter, Map, Score, Stage)


def stages_in(module) -> list:
    """The stage classes a module defines (not those it imports)."""
    return [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, _Base) and v not in KINDS and v.__module__ == module.__name__
    ]
