"""A stage's params: declared as annotated class attributes, turned into the manifest's JSON
Schema (the same shape the Rust SDK's `#[param]` writes) and checked when the stage is built.

    class WordCount(Filter):
        min_words: int = Param(50, min=0, doc="Fewest words a kept document may have.")
        max_words: int = 100_000
        lang: str | None = None          # optional: no default, may be left out

Types: `int`, `float`, `str`, `bool`, `list[str]`, `list[int]`, `list[float]`, and any of
them `| None` (optional). A param without a default and not optional is required.
"""

import typing

from .errors import InvalidParams

_REQUIRED = object()

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


class Param:
    """A param's default and constraints (a plain value as the attribute is the default)."""

    def __init__(self, default=_REQUIRED, *, doc: str = "", min=None, max=None, choices=None):
        self.default = default
        self.doc = doc
        self.min = min
        self.max = max
        self.choices = list(choices) if choices is not None else None


class Spec:
    """One declared param: its name, type and constraints."""

    def __init__(self, name: str, hint, param: Param):
        self.name = name
        self.optional = False
        args = typing.get_args(hint)
        if args and type(None) in args:
            rest = [a for a in args if a is not type(None)]
            if len(rest) != 1:
                raise TypeError(f"param {name}: {hint!r} is not one type or None")
            hint, self.optional = rest[0], True
        self.item = None
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint) or (str,)
            if item not in _JSON_TYPES:
                raise TypeError(f"param {name}: list items must be int, float, str or bool, not {item!r}")
            self.item = item
            hint = list
        elif hint not in _JSON_TYPES:
            raise TypeError(f"param {name}: type {hint!r} is not int, float, str, bool, list or optional")
        self.type = hint
        self.param = param
        if param.default is None:
            self.optional = True

    @property
    def required(self) -> bool:
        return self.param.default is _REQUIRED and not self.optional

    def default(self):
        d = self.param.default
        if d is _REQUIRED:
            return None
        return list(d) if isinstance(d, list) else d

    def schema(self) -> dict:
        if self.type is list:
            s = {"type": "array", "items": {"type": _JSON_TYPES[self.item]}}
        else:
            s = {"type": _JSON_TYPES[self.type]}
        p = self.param
        if p.min is not None:
            s["minimum"] = p.min
        if p.max is not None:
            s["maximum"] = p.max
        if p.choices is not None:
            s["enum"] = p.choices
        if p.doc:
            s["description"] = p.doc
        if p.default is not _REQUIRED and p.default is not None:
            s["default"] = p.default
        return s

    def check(self, value):
        """`value` from the params object, checked; raises InvalidParams naming the param."""
        if value is None:
            if self.optional:
                return None
            raise InvalidParams(f"{self.name}: must not be null")
        if self.type is list:
            if not isinstance(value, list):
                raise InvalidParams(f"{self.name}: expected a list, got {_json_name(value)}")
            return [_scalar(f"{self.name}[{i}]", self.item, v) for i, v in enumerate(value)]
        value = _scalar(self.name, self.type, value)
        p = self.param
        if p.min is not None and value < p.min:
            raise InvalidParams(f"{self.name}: {value} is below the minimum {p.min}")
        if p.max is not None and value > p.max:
            raise InvalidParams(f"{self.name}: {value} is above the maximum {p.max}")
        if p.choices is not None and value not in p.choices:
            raise InvalidParams(f"{self.name}: {value!r} is not one of {p.choices}")
        return value


def _json_name(v) -> str:
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _scalar(name: str, ty, v):
    if ty is bool:
        ok = isinstance(v, bool)
    elif ty is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif ty is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        v = float(v) if ok else v
    else:
        ok = isinstance(v, str)
    if not ok:
        raise InvalidParams(f"{name}: expected {_JSON_TYPES[ty]}, got {_json_name(v)}")
    return v


def _own_annotations(klass) -> dict:
    """The annotations `klass` itself declares (from Python 3.10 a class's `__annotations__`
    are its own, never a base's; from 3.14, the CPython inside componentize-py's components,
    they are made on demand and are not in the class's `__dict__`)."""
    return dict(getattr(klass, "__annotations__", None) or {})


def specs(cls) -> list:
    """The params `cls` and its bases declare, in declaration order (bases first)."""
    out = {}
    for klass in reversed(cls.__mro__):
        hints = _own_annotations(klass)
        if not hints:
            continue
        resolved = typing.get_type_hints(klass)
        for name in hints:
            if name.startswith("_") or typing.get_origin(resolved[name]) is typing.ClassVar:
                continue
            raw = klass.__dict__.get(name, _REQUIRED)
            param = raw if isinstance(raw, Param) else Param(raw)
            out[name] = Spec(name, resolved[name], param)
    return list(out.values())


def schema(cls) -> dict:
    """The params' JSON Schema, as the manifest carries it."""
    ss = specs(cls)
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {s.name: s.schema() for s in ss},
        "required": [s.name for s in ss if s.required],
    }


def bind(cls, params: dict) -> dict:
    """The value of every declared param: given, else its default; unknown and missing
    required params are errors naming them."""
    if not isinstance(params, dict):
        raise InvalidParams(f"params: expected an object, got {_json_name(params)}")
    ss = specs(cls)
    known = {s.name for s in ss}
    unknown = sorted(k for k in params if k not in known)
    if unknown:
        raise InvalidParams(f"{unknown[0]}: unknown param (known: {', '.join(sorted(known)) or 'none'})")
    values = {}
    for s in ss:
        if s.name in params:
            values[s.name] = s.check(params[s.name])
        elif s.required:
            raise InvalidParams(f"{s.name}: required")
        else:
            values[s.name] = s.default()
    return values
