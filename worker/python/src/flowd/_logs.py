"""Task logs: lines a handler writes ride on its heartbeats and outcome.

Each attempt keeps at most 64 KiB of lines (the agent's cap); a line is cut
at 4 KiB. ``logs_seq`` numbers the lines so that a call re-sent after an
unknown outcome stores them once (docs/rpc.md, "Task logs").
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

MAX_ATTEMPT_LOG_BYTES = 64 << 10
MAX_LOG_LINE_BYTES = 4 << 10

#: The task whose handler is running in this thread or asyncio task.
current_task: "contextvars.ContextVar[Optional[Any]]" = contextvars.ContextVar("flowd_current_task", default=None)


def _cut(line: str) -> str:
    b = line.encode("utf-8", "replace")
    if len(b) <= MAX_LOG_LINE_BYTES:
        return line
    return b[:MAX_LOG_LINE_BYTES].decode("utf-8", "ignore") + "…"


class TaskLog:
    """An attempt's log on its way to the cluster."""

    def __init__(self, on_wait: Optional[Callable[[], None]] = None) -> None:
        self._mu = threading.Lock()
        self.pending: List[Dict[str, Any]] = []
        self.seq = 0  # line number of pending[0]
        self.total = 0  # lines written, dropped ones included
        self.bytes = 0
        self.full = False
        self._on_wait = on_wait

    def add(self, text: str, stream: str = "log") -> None:
        now = int(time.time() * 1000)
        wake = False
        with self._mu:
            for line in str(text).rstrip("\n").split("\n"):
                self.total += 1
                if self.full:
                    continue
                line = _cut(line.rstrip("\r"))
                n = len(line.encode("utf-8", "replace"))
                if self.bytes + n > MAX_ATTEMPT_LOG_BYTES:
                    self.full = True
                    continue
                self.bytes += n
                self.pending.append({"at": now, "stream": stream, "line": line})
                wake = wake or len(self.pending) == 1
        if wake and self._on_wait is not None:
            self._on_wait()

    def take(self) -> Tuple[Dict[str, Any], int]:
        """The log params the next call carries ({} when nothing) and the line count they report up to."""
        with self._mu:
            sent = self.seq + len(self.pending)
            if self.total == self.seq and not self.pending:
                return {}, self.total
            p: Dict[str, Any] = {"logs": list(self.pending), "logs_seq": self.seq}
            if self.total - sent:
                p["logs_dropped"] = self.total - sent
            return p, self.total

    def acked(self, p: Dict[str, Any], upto: int) -> None:
        """Drop what an accepted call carried."""
        if "logs_seq" not in p:
            return
        with self._mu:
            n = min(len(p.get("logs") or []), len(self.pending))
            del self.pending[:n]
            self.seq += n
            if not self.pending:
                self.seq = upto


class TaskLogHandler(logging.Handler):
    """A ``logging.Handler`` that sends records to the log of the task whose
    handler emits them (found through a context variable, so it works in
    the thread pool and in asyncio tasks alike); records logged outside a
    task are ignored. The worker installs one on the root logger (option
    ``capture_logging``), so ``logging.getLogger(__name__).info(...)`` in a
    handler shows up in ``flowd task logs``."""

    def __init__(self, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        t = current_task.get()
        if t is None or (record.name.startswith("flowd.") and not record.name.startswith("flowd.task")):
            return
        try:
            t._log.add(self.format(record), "log")
        except Exception:  # noqa: BLE001 - logging must never raise into the handler
            self.handleError(record)
