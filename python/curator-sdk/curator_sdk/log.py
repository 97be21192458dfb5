"""Log lines to the host's log (inside curator-host), or to stderr (native CPython)."""

import sys

# Inside the component the WIT bindings exist when this module is imported (at build time), and
# only what was imported then is there later: the import cannot wait for the first log line.
try:
    from wit_world.imports import log as _wit_log
    from wit_world.imports import types as _wit_types
except ImportError:
    _wit_log = _wit_types = None

_LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    if level not in _LEVELS:
        raise ValueError(f"log level {level!r}: one of {', '.join(_LEVELS)}")
    if _wit_log is not None:
        _wit_log.log(_wit_types.Level[level.upper()], message)
    else:
        print(f"{level.upper()} {message}", file=sys.stderr)


def trace(message: str) -> None:
    log("trace", message)


def debug(message: str) -> None:
    log("debug", message)


def info(message: str) -> None:
    log("info", message)


def warn(message: str) -> None:
    log("warn", message)


def error(message: str) -> None:
    log("error", message)
