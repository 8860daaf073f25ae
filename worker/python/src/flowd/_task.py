"""Handlers and the task context a handler sees (part of the worker SDK)."""

from __future__ import annotations

import inspect
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._logs import TaskLog
from .errors import FlowdError

if TYPE_CHECKING:
    from .worker import Worker

Handler = Callable[["TaskContext"], Any]


class Cancelled(FlowdError):
    """Raised by :meth:`TaskContext.check` once the task was cancelled
    (lease lost, timeout, worker stopping)."""


class _Spec:
    __slots__ = ("fn", "queue", "timeout", "is_async")

    def __init__(self, fn: Handler, queue: Optional[str], timeout: Optional[float]) -> None:
        self.fn, self.queue, self.timeout = fn, queue, timeout
        self.is_async = inspect.iscoroutinefunction(fn)


class Registry:
    """Handlers by task type."""

    def __init__(self) -> None:
        self.handlers: Dict[str, _Spec] = {}

    def task(self, type: str, *, queue: Optional[str] = None,
             timeout: Optional[float] = None) -> Callable[[Handler], Handler]:
        """Decorator: register ``fn(ctx)`` for task ``type``. ``queue``: the
        worker also claims from this queue; ``timeout`` (seconds): the
        handler is cancelled after it and the attempt fails (retryable)."""

        def deco(fn: Handler) -> Handler:
            self.register(type, fn, queue=queue, timeout=timeout)
            return fn

        return deco

    def register(self, type: str, fn: Handler, *, queue: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self.handlers[type] = _Spec(fn, queue, timeout)


#: The registry the module-level :func:`task` decorator fills; a Worker
#: created without handlers starts with a copy of it.
default_registry = Registry()


def task(type: str, *, queue: Optional[str] = None, timeout: Optional[float] = None) -> Callable[[Handler], Handler]:
    """Module-level decorator (``@flowd.task("resize")``) for
    ``python -m flowd worker --module``."""
    return default_registry.task(type, queue=queue, timeout=timeout)


class TaskContext:
    """A claimed task as its handler sees it."""

    def __init__(self, w: "Worker", c: Mapping[str, Any]) -> None:
        self._w = w
        self.id: str = c["task_id"]
        self.run_id: str = c.get("run_id", "")
        self.key: str = c.get("task_key", "")
        self.type: str = c.get("type", "")
        self.queue: str = c.get("queue", "")
        self.input: Any = c.get("input")
        self.run_input: Any = c.get("run_input")
        self.dep_results: Dict[str, Any] = dict(c.get("dep_results") or {})
        self.attempt: int = int(c.get("attempt", 0))
        self.fencing_token: int = int(c["fencing_token"])
        self.lease_ms: int = int(c.get("lease_ms") or 30000)
        self.lease_expires_at: str = c.get("lease_expires_at", "")
        self.compensation: bool = bool(c.get("compensation"))
        self.result: Any = c.get("result")
        self.timeout_ms: int = int(c.get("timeout_ms") or 0)
        #: Set when the handler should stop: its lease was lost, it timed
        #: out, or the worker stops hard. Its result will be discarded.
        self.cancelled = threading.Event()
        #: Why ``cancelled`` was set: "lease lost", "timeout", "handler timeout", "worker stopped".
        self.cancel_reason = ""
        self.deadline: Optional[float] = None  # time.monotonic() when the attempt times out
        self._log = TaskLog(self._logs_waiting)
        self._spawn: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        self._done = False
        self._acked = False
        self._async_cancel: Optional[Callable[[], None]] = None
        #: A logger whose records go to this attempt's log (and, by
        #: propagation, wherever the program's logging sends them).
        self.log = logging.LoggerAdapter(logging.getLogger("flowd.task." + self.type), {"task": self.id})

    @property
    def idempotency_key(self) -> str:
        """Names this attempt (run, task, attempt; "/revert" for a compensation)."""
        k = f"{self.run_id}/{self.key}/{self.attempt}"
        return k + "/revert" if self.compensation else k

    def spawn(self, *children: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]) -> None:
        """Add children to the run when this task completes (dynamic
        fan-out): task specs (``{key, type, input, ...}``). Tasks that
        depended on this one wait for them all."""
        with self._lock:
            for c in children:
                if isinstance(c, Mapping):
                    self._spawn.append(dict(c))
                else:
                    self._spawn.extend(dict(x) for x in c)

    def print(self, *args: Any, stream: str = "stdout") -> None:
        """A line in the attempt's log, like print()."""
        self._log.add(" ".join(str(a) for a in args), stream)

    def check(self) -> None:
        """Raise :class:`Cancelled` if the task was cancelled."""
        if self.cancelled.is_set():
            raise Cancelled(self.cancel_reason or "cancelled")

    def _cancel(self, reason: str) -> None:
        with self._lock:
            if self.cancelled.is_set() or self._done:
                return
            self.cancel_reason = reason
            self.cancelled.set()
            cb = self._async_cancel
        if cb is not None:
            cb()

    def _logs_waiting(self) -> None:
        self._w._hb.flush_soon(self)


