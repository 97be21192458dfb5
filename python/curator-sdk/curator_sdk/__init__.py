"""curator's SDK for stages written in Python: subclass `Filter`, `Map`, `Score` or `Stage`,
build it into a sandboxed WASM component with `curator-sdk build stage.py`, and drop the file
into a plugins directory. See the book's chapter "Write a stage in Python"."""

from .batch import Batch, Column, Columns, Keep
from .errors import Failed, InvalidParams, OutOfMemory, StageError
from .params import Param
from .stage import Directory, Filter, Map, Score, Stage
from . import log

__all__ = [
    "Batch",
    "Column",
    "Columns",
    "Keep",
    "Failed",
    "InvalidParams",
    "OutOfMemory",
    "StageError",
    "Param",
    "Directory",
    "Filter",
    "Map",
    "Score",
    "Stage",
    "log",
]
