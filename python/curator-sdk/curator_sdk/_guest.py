"""The WIT world's exports for one stage class: what `curator-sdk build` puts in the
component (it writes `WitWorld = world(TheStage)` into the app module componentize-py
snapshots). Only imported inside the component, where `wit_world` exists."""

from componentize_py_types import Err
from wit_world import WitWorld as _World
from wit_world.imports import types as wit

from .batch import Batch, Column, Columns, Keep
from .errors import InvalidParams, OutOfMemory, classify

_TYPE_FROM_WIT = {
    wit.ColumnType.UTF8: "utf8",
    wit.ColumnType.BINARY: "binary",
    wit.ColumnType.INT64: "int64",
    wit.ColumnType.FLOAT64: "float64",
    wit.ColumnType.BOOLEAN: "boolean",
    wit.ColumnType.FLOAT32_VECTOR: "float32-vector",
}
_TYPE_TO_WIT = {v: k for k, v in _TYPE_FROM_WIT.items()}


def _error(exc: BaseException):
    e = classify(exc)
    if isinstance(e, InvalidParams):
        return wit.StageError_InvalidParams(str(e))
    if isinstance(e, OutOfMemory):
        return wit.StageError_OutOfMemory(str(e))
    return wit.StageError_Failed(str(e))


def _column_out(c: Column):
    return wit.Column(c.name, _TYPE_TO_WIT[c.type], c.validity, list(c.offsets), c.data)


def _output(out):
    if isinstance(out, Keep):
        return wit.Output_Selection(out.rows)
    if isinstance(out, Columns):
        columns = [_column_out(c) for c in out.columns]
        if out.keep is None:
            return wit.Output_Columns(columns)
        return wit.Output_Scored(wit.Scored(columns, out.keep))
    return wit.Output_Batch(wit.Batch(out.num_rows, [_column_out(c) for c in out.columns.values()]))


def world(cls):
    """The `WitWorld` class componentize-py exports, running `cls`."""
    manifest = cls.manifest_json()
    state = {}

    class WitWorld(_World):
        def manifest(self) -> str:
            return manifest

        def setup(self, params: str) -> None:
            try:
                state["stage"] = cls.from_json(params)
            except Exception as e:  # noqa: BLE001 - reported to the host, classed
                raise Err(_error(e)) from None

        def process(self, input):
            try:
                n = input.num_rows
                batch = Batch(n, [Column(c.name, _TYPE_FROM_WIT[c.ty], n, c.data, c.offsets, c.validity) for c in input.columns])
                return _output(state["stage"].run(batch))
            except Exception as e:  # noqa: BLE001 - reported to the host, classed
                raise Err(_error(e)) from None

        def teardown(self) -> None:
            stage = state.pop("stage", None)
            if stage is not None:
                stage.teardown()

    return WitWorld
