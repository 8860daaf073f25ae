"""The worker's heartbeat scheduler (part of the worker SDK)."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Dict, List

from . import client as _client
from ._task import TaskContext
from .errors import FlowdError, NotFound

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger("flowd.worker")


class _Heartbeats:
    """One thread that schedules every task's heartbeats (at lease/3, the
    first after ``ack_after``), log flushes and local deadlines; the calls
    themselves go out on a small pool so that a slow one delays no other."""

    def __init__(self, w: "Worker") -> None:
        self.w = w
        self._heap: List[Any] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="flowd-hb")
        self._stop = False
        self._flushing: Dict[int, bool] = {}
        self._thread = threading.Thread(target=self._loop, name="flowd-heartbeats", daemon=True)
        self._thread.start()

    def add(self, t: TaskContext) -> None:
        every = max(t.lease_ms, 300) / 3000.0
        first = min(self.w.ack_after, every) if self.w.ack_after >= 0 else 0.0
        now = time.monotonic()
        if t.deadline is not None:
            first = min(first, max(0.0, (t.deadline - now) / 3))
            self._push(t.deadline, "deadline", t)
        self._push(now + first, "beat", t)

    def flush_soon(self, t: TaskContext) -> None:
        if id(t) in self._flushing:
            return
        self._flushing[id(t)] = True
        self._push(time.monotonic() + self.w.log_flush, "flush", t)

    def _push(self, at: float, kind: str, t: TaskContext) -> None:
        with self._cv:
            entry = (at, next(self._seq), kind, t)
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:  # only an earlier wake-up needs the scheduler to look again
                self._cv.notify()

    def _compact(self) -> None:
        """Drop entries of finished tasks (a deadline hours away would keep
        its task alive until then). Called with the lock held."""
        live = [e for e in self._heap if not e[3]._done]
        if len(live) < len(self._heap) // 2:
            heapq.heapify(live)
            self._heap = live

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._pool.shutdown(wait=False)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cv.wait(None if not self._heap else max(0.0, self._heap[0][0] - time.monotonic()))
                if self._stop:
                    return
                _, _, kind, t = heapq.heappop(self._heap)
                if len(self._heap) > 1024:
                    self._compact()
            if t._done:
                self._flushing.pop(id(t), None)
                continue
            if kind == "deadline":
                t._cancel("timeout")
                continue
            if kind == "flush":
                self._flushing.pop(id(t), None)
            try:
                self._pool.submit(self._beat, t, kind)
            except RuntimeError:
                return

    def _beat(self, t: TaskContext, kind: str) -> None:
        every = max(t.lease_ms, 300) / 3000.0
        try:
            if t._done or t.cancelled.is_set():
                return
            if self.w._hold_heartbeats.is_set():
                return
            params, upto = t._log.take()
            params.update({"task_id": t.id, "fencing_token": t.fencing_token})
            try:
                r = self.w._client.call("task.heartbeat", params, mode=_client.ALL, timeout=every)
            except NotFound:
                t._cancel("lease lost")
                return
            except FlowdError as e:
                if not t._done:
                    log.warning("heartbeat of %s failed; will retry: %s", t.id, e)
                return
            if not r.get("accepted"):
                log.warning("lease of %s lost (reaped, cancelled or reverted): cancelling the handler", t.id)
                self.w._count("lost")
                t._cancel("lease lost")
                return
            t._acked = True
            t._log.acked(params, upto)
        finally:
            if kind == "beat" and not t._done and not t.cancelled.is_set():
                self._push(time.monotonic() + every, "beat", t)


