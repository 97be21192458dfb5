"""The three ways a stage fails, as the host classes them (the WIT world's `stage-error`).

Raise them from a stage; any other exception is a `Failed` carrying its type and message, and
Python's `MemoryError` (the sandbox's memory cap reached) is an `OutOfMemory`, which the host
answers by retrying the batch in halves.
"""


class StageError(Exception):
    """A stage's failure; the subclass says which kind."""


class InvalidParams(StageError):
    """The params given to the stage are unusable: the message says which and why."""


class Failed(StageError):
    """A batch could not be processed: the message says why."""


class OutOfMemory(StageError):
    """The batch did not fit in the stage's memory: the host retries it in halves."""


def classify(exc: BaseException) -> StageError:
    """The stage error an exception raised by a stage's code stands for."""
    if isinstance(exc, StageError):
        return exc
    if isinstance(exc, MemoryError):
        return OutOfMemory(str(exc) or "MemoryError")
    where = ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        where = f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
    return Failed(f"{type(exc).__name__}: {exc}{where}")
