"""Batches as a stage sees them: columns in Arrow's layout (the WIT world's `column`), read as
Python values on demand, and the outputs a stage answers with.

A column keeps the host's buffers as they came (`data` is the bytes object the boundary made,
`offsets` the row offsets); `values()` decodes them once per batch. A text column whose bytes
are all ASCII is decoded in one call and sliced, the rest row by row.
"""

import array
import struct

from .errors import Failed

UTF8, BINARY, INT64, FLOAT64, BOOLEAN, FLOAT32_VECTOR = "utf8", "binary", "int64", "float64", "boolean", "float32-vector"
TYPES = (UTF8, BINARY, INT64, FLOAT64, BOOLEAN, FLOAT32_VECTOR)


def _bitmap(bits) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


class Column:
    """One column: `name`, `type` (one of `TYPES`), Arrow's buffers (`validity`: a bitmap,
    empty when every row is valid; `offsets`; `data`) and the row count."""

    __slots__ = ("name", "type", "validity", "offsets", "data", "rows", "_values")

    def __init__(self, name: str, type: str, rows: int, data: bytes, offsets=(), validity: bytes = b""):
        if type not in TYPES:
            raise ValueError(f"column {name}: unknown type {type!r}")
        self.name, self.type, self.rows = name, type, rows
        self.data, self.offsets, self.validity = data, offsets, validity
        self._values = None

    def __len__(self) -> int:
        return self.rows

    def __repr__(self) -> str:
        return f"Column({self.name!r}, {self.type}, {self.rows} rows)"

    def is_valid(self, i: int) -> bool:
        v = self.validity
        return not v or bool(v[i >> 3] >> (i & 7) & 1)

    def values(self) -> list:
        """The rows as Python values (`None` for null rows), decoded once."""
        if self._values is None:
            self._values = self._decode()
        return self._values

    def views(self) -> list:
        """utf8 and binary columns: each row as a `memoryview` of the batch's data buffer (no
        copy per row; `bytes(v)` or `str(v, "utf-8")` makes one), for stages that work on bytes."""
        if self.type not in (UTF8, BINARY):
            raise Failed(f"column {self.name}: views() is for utf8 and binary columns, not {self.type}")
        m, o = memoryview(self.data), self.offsets
        return [m[o[i] : o[i + 1]] for i in range(self.rows)]

    def _decode(self) -> list:
        n, d, o = self.rows, self.data, self.offsets
        t = self.type
        if t == UTF8:
            if len(o) != n + 1 or (n and o[n] > len(d)):
                raise Failed(f"column {self.name}: {len(o)} offsets for {n} rows over {len(d)} bytes")
            whole = d[: o[n]].decode("utf-8", "replace") if n else ""
            if len(whole) == (o[n] if n else 0):
                out = [whole[o[i] : o[i + 1]] for i in range(n)]
            else:
                out = [d[o[i] : o[i + 1]].decode("utf-8", "replace") for i in range(n)]
        elif t == BINARY:
            out = [d[o[i] : o[i + 1]] for i in range(n)]
        elif t == INT64:
            out = list(struct.unpack_from(f"<{n}q", d)) if n else []
        elif t == FLOAT64:
            out = list(struct.unpack_from(f"<{n}d", d)) if n else []
        elif t == BOOLEAN:
            out = [bool(d[i >> 3] >> (i & 7) & 1) for i in range(n)]
        else:
            dim = o[0] if o else 0
            flat = array.array("f")
            flat.frombytes(d[: 4 * dim * n])
            out = [list(flat[i * dim : (i + 1) * dim]) for i in range(n)]
        if self.validity:
            out = [v if self.is_valid(i) else None for i, v in enumerate(out)]
        return out

    @staticmethod
    def of(name: str, values, type: str = None) -> "Column":
        """A column from Python values, its type given or inferred (str: utf8, bytes: binary,
        bool: boolean, int: int64, float: float64, list of floats: float32-vector); `None`
        is a null row."""
        values = list(values)
        t = type or _infer(name, values)
        n = len(values)
        validity = _bitmap([v is not None for v in values]) if any(v is None for v in values) else b""
        if t in (UTF8, BINARY):
            parts = [b"" if v is None else (v.encode("utf-8") if t == UTF8 else bytes(v)) for v in values]
            offsets, end = [0], 0
            for p in parts:
                end += len(p)
                offsets.append(end)
            return Column(name, t, n, b"".join(parts), offsets, validity)
        if t == INT64:
            return Column(name, t, n, struct.pack(f"<{n}q", *[0 if v is None else int(v) for v in values]), (), validity)
        if t == FLOAT64:
            return Column(name, t, n, struct.pack(f"<{n}d", *[0.0 if v is None else float(v) for v in values]), (), validity)
        if t == BOOLEAN:
            return Column(name, t, n, _bitmap([bool(v) for v in values]), (), validity)
        dims = {len(v) for v in values if v is not None}
        if len(dims) > 1:
            raise Failed(f"column {name}: vectors of different dimensions {sorted(dims)}")
        dim = dims.pop() if dims else 0
        flat = array.array("f")
        for v in values:
            flat.extend(v if v is not None else [0.0] * dim)
        return Column(name, t, n, flat.tobytes(), [dim], validity)


def _infer(name: str, values) -> str:
    for v in values:
        if v is None:
            continue
        if isinstance(v, str):
            return UTF8
        if isinstance(v, (bytes, bytearray, memoryview)):
            return BINARY
        if isinstance(v, bool):
            return BOOLEAN
        if isinstance(v, int):
            return INT64
        if isinstance(v, float):
            return FLOAT64
        if isinstance(v, (list, tuple)):
            return FLOAT32_VECTOR
        raise Failed(f"column {name}: cannot store a {type(v).__name__}")
    return UTF8


class Batch:
    """A batch of documents: `num_rows` and columns by name (`id` and `text` by convention,
    plus the metadata columns the stage's manifest asks for).

    `batch["text"]` is the text column's values; `batch.column("text")` the column itself."""

    def __init__(self, num_rows: int, columns):
        self.num_rows = num_rows
        self.columns = {c.name: c for c in columns}

    @staticmethod
    def of(data: dict) -> "Batch":
        """A batch from `{name: values}` (tests, and stages that answer a new batch)."""
        cols = [v if isinstance(v, Column) else Column.of(k, v) for k, v in data.items()]
        rows = {len(c) for c in cols}
        if len(rows) > 1:
            raise Failed(f"batch: columns of different lengths {sorted(rows)}")
        return Batch(rows.pop() if rows else 0, cols)

    def __len__(self) -> int:
        return self.num_rows

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def __getitem__(self, name: str) -> list:
        return self.column(name).values()

    def column(self, name: str) -> Column:
        try:
            return self.columns[name]
        except KeyError:
            raise Failed(f"the batch has no column {name!r} (it has {', '.join(self.columns) or 'none'})") from None


class Keep:
    """Output: keep the rows at these indices (ascending); nothing else changes."""

    def __init__(self, rows):
        self.rows = list(rows)


class Columns:
    """Output: columns added to (or replacing) the input's, one value per input row; with
    `keep`, then only those rows kept (a filter that also writes its score)."""

    def __init__(self, columns, keep=None):
        if isinstance(columns, dict):
            columns = [v if isinstance(v, Column) else Column.of(k, v) for k, v in columns.items()]
        self.columns = list(columns)
        self.keep = None if keep is None else list(keep)
