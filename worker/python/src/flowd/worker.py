"""The worker SDK: register handlers by task type and run them.

The worker long-polls claims up to its free slots (with a request id, so a
claim whose answer was lost is re-sent safely), heartbeats every lease at
lease/3 (the first one acknowledges the claim), cancels a handler whose
lease is lost or whose attempt timed out, and reports results and failures
with the fencing token; each completion claims the worker's next task in
the same call. Sync handlers run in a thread pool of ``slots`` threads,
``async def`` handlers on one asyncio loop. See docs/python.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import threading
import time
import traceback
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import client as _client
from ._heartbeats import _Heartbeats
from ._logs import TaskLogHandler, current_task
from ._task import Cancelled, Handler, Registry, TaskContext, default_registry, task
from .client import Client
from .errors import FlowdError, NonRetryable, RPCError, Timeout, Unavailable, is_unavailable

__all__ = ["Worker", "TaskContext", "Registry", "task", "default_registry", "Cancelled"]

log = logging.getLogger("flowd.worker")


class Worker:
    """Runs registered handlers for claimed tasks.

    ``addr``, ``token``, ``ca_cert``... are as for :class:`flowd.Client`.
    ``slots`` is the number of tasks run at once (sync handlers in a thread
    pool of that size; async handlers on one event loop, within the same
    slots). ``queues``: queues to claim from (default: every queue, or the
    queues the handlers name). ``claim_wait``: one long poll's wait.
    ``drain_timeout``: how long a graceful stop waits for running handlers.
    ``capture_logging``: install a :class:`TaskLogHandler` on the root
    logger so that ``logging`` calls in a handler go to the task's log.
    """

    def __init__(self, addr: Union[None, str, Sequence[str]] = None, *, id: Optional[str] = None,
                 queues: Optional[Iterable[str]] = None, slots: int = 4, claim_wait: float = 20.0,
                 drain_timeout: float = 30.0, max_backoff: float = 30.0, ack_after: float = 1.0,
                 log_flush: float = 1.0, any_type: bool = False, claim_on_complete: bool = True,
                 capture_logging: bool = True, registry: Optional[Registry] = None,
                 **client_options: Any) -> None:
        self.id = id or f"{socket.gethostname()}-{os.getpid()}"
        self.slots = max(1, int(slots))
        self._queues = list(queues) if queues else None
        self.claim_wait = claim_wait
        self.drain_timeout = drain_timeout
        self.max_backoff = max_backoff
        self.ack_after = ack_after
        self.log_flush = log_flush
        self.any_type = any_type
        self.claim_on_complete = claim_on_complete
        self.capture_logging = capture_logging
        self._registry = Registry()
        self._registry.handlers.update((registry or default_registry).handlers)
        client_options.setdefault("max_attempts", 1000)
        client_options.setdefault("backoff_cap", max_backoff)
        self._client = Client(addr, name="flowd-worker-python", **client_options)
        self._claims = Client(addr, name="flowd-worker-python", **client_options)
        self._hb = _Heartbeats(self)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="flowd-task")
        self._free = threading.Semaphore(self.slots)
        self._inflight = 0
        self._inflight_cv = threading.Condition()
        self._running: Dict[int, TaskContext] = {}
        self._stopping = threading.Event()
        self._hard = threading.Event()
        self._hold_heartbeats = threading.Event()  # tests: simulate a stalled worker
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_lock = threading.Lock()
        self._unknown_claim: Optional[Dict[str, Any]] = None
        self._stats_lock = threading.Lock()
        #: Counters: claimed, completed, failed, rejected (a result the
        #: cluster refused: stale token), lost (leases lost while running),
        #: timed_out, discarded.
        self.stats: Dict[str, int] = {k: 0 for k in ("claimed", "completed", "failed", "rejected", "lost",
                                                     "timed_out", "discarded")}
        self._thread: Optional[threading.Thread] = None
        #: Why a worker started with :meth:`start` stopped on its own (None: it did not).
        self.error: Optional[BaseException] = None
        self._log_handler: Optional[TaskLogHandler] = None
        task_logger = logging.getLogger("flowd.task")
        if task_logger.level == logging.NOTSET:
            task_logger.setLevel(logging.INFO)  # ctx.log.info reaches the task log whatever the root level

    # -- registration -----------------------------------------------------------

    def task(self, type: str, *, queue: Optional[str] = None,
             timeout: Optional[float] = None) -> Callable[[Handler], Handler]:
        """Decorator: ``@worker.task("resize", queue="images", timeout=30)``."""
        return self._registry.task(type, queue=queue, timeout=timeout)

    def register(self, type: str, fn: Handler, *, queue: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self._registry.register(type, fn, queue=queue, timeout=timeout)

    @property
    def types(self) -> List[str]:
        return sorted(self._registry.handlers)

    @property
    def queues(self) -> Optional[List[str]]:
        """The queues claimed from (None: every queue)."""
        named = {s.queue for s in self._registry.handlers.values() if s.queue}
        if self._queues is None and not named:
            return None
        out = set(self._queues or [])
        out |= named
        if self._queues is None and any(s.queue is None for s in self._registry.handlers.values()):
            out.add("default")
        return sorted(out)

    @property
    def client(self) -> Client:
        """The worker's client (heartbeats and reports)."""
        return self._client

    def _count(self, k: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[k] = self.stats.get(k, 0) + n

    # -- running -----------------------------------------------------------------

    def run(self, install_signals: bool = True) -> None:
        """Claim and run tasks until :meth:`stop` (or SIGTERM/SIGINT when
        ``install_signals`` and called from the main thread), then drain:
        stop claiming, let running handlers finish (up to
        ``drain_timeout``), report them and return. A second signal stops
        at once: handlers are cancelled and their leases expire."""
        if not self._registry.handlers:
            raise ValueError("no handlers registered")
        restore: Dict[signal.Signals, Any] = {}
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                restore[sig] = signal.signal(sig, self._on_signal)
        if self.capture_logging:
            self._log_handler = TaskLogHandler()
            logging.getLogger().addHandler(self._log_handler)
        else:
            self._log_handler = TaskLogHandler()
            logging.getLogger("flowd.task").addHandler(self._log_handler)
        try:
            self._hello()
            log.info("worker %s started: types %s, queues %s, slots %d", self.id, self.types,
                     self.queues or "all", self.slots)
            self._claim_loop()
            self._drain()
        finally:
            for sig, h in restore.items():
                signal.signal(sig, h)
            if self._log_handler is not None:
                logging.getLogger().removeHandler(self._log_handler)
                logging.getLogger("flowd.task").removeHandler(self._log_handler)
            self._shutdown()

    def start(self) -> "Worker":
        """Run in a background thread (no signal handlers); see :meth:`stop`.
        If the worker cannot run (e.g. its token is refused), the exception
        is logged and kept in :attr:`error`."""

        def serve() -> None:
            try:
                self.run(install_signals=False)
            except Exception as e:  # noqa: BLE001 - reported, not lost with the thread
                self.error = e
                log.error("worker %s stopped: %s", self.id, e)

        self._thread = threading.Thread(target=serve, name=f"flowd-worker-{self.id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, drain: bool = True, wait: bool = True, timeout: Optional[float] = None) -> None:
        """Stop claiming and drain (``drain=False``: cancel running handlers
        at once). With ``wait``, return when :meth:`run` has returned."""
        self._begin_stop()
        if not drain:
            self._stop_hard()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stopping.is_set():
            log.warning("second signal: stopping now")
            self._stop_hard()
        else:
            self._begin_stop()
            log.info("signal %s: draining (send again to stop at once)", signal.Signals(signum).name)

    def _begin_stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        # Half-close the claim connections: the agent ends the long poll at
        # once and answers what it leased in that instant; those tasks run
        # as part of the drain.
        self._claims.half_close()

    def _stop_hard(self) -> None:
        self._stopping.set()
        self._hard.set()
        for t in list(self._running.values()):
            t._cancel("worker stopped")
        with self._inflight_cv:
            self._inflight_cv.notify_all()

    def _hello(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                self._client.hello()
                return
            except FlowdError as e:
                if not is_unavailable(e):
                    raise
                attempt += 1
                d = self._backoff(attempt, e)
                log.warning("cannot reach the cluster; retrying in %.1fs: %s", d, e)
                self._stopping.wait(d)

    def _backoff(self, attempt: int, err: Optional[BaseException]) -> float:
        return _client._backoff(attempt, 0.1, self.max_backoff, err)

    def _claim_params(self, n: int) -> Dict[str, Any]:
        p: Dict[str, Any] = {"worker_id": self.id, "max": n, "slots": self.slots}
        if not self.any_type:
            p["types"] = self.types
        q = self.queues
        if q:
            p["queues"] = q
        return p

    def _claim_loop(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            if not self._free.acquire(timeout=0.5):
                continue
            n = 1
            while n < self.slots and self._free.acquire(blocking=False):
                n += 1
            params = self._claim_params(n)
            params["wait_ms"] = int(self.claim_wait * 1000)
            u = self._unknown_claim
            if u is not None and u["max"] <= n:
                params["request_id"] = u["request_id"]  # re-send: the agent answers the leases it still holds
            else:
                params["request_id"] = secrets.token_hex(12)
            try:
                r = self._claims.call("task.claim", params, mode=_client.LOST, timeout=self.claim_wait + 5.0)
            except RPCError as e:
                self._release(n)
                if not isinstance(e, Unavailable):
                    log.error("claim refused: %s", e)
                self._unknown_claim = {"request_id": params["request_id"], "max": n} if isinstance(e, Unavailable) else None
                attempt += 1
                self._stopping.wait(self._backoff(attempt, e))
                continue
            except FlowdError as e:
                self._release(n)
                if self._stopping.is_set():
                    # A lease the cut answer held expires unacknowledged:
                    # it spends no attempt.
                    break
                self._unknown_claim = {"request_id": params["request_id"], "max": n}
                if isinstance(e, Timeout):
                    # Held past its wait: the agent is stopped or wedged.
                    # Re-send the claim through another one.
                    self._claims.reset()
                attempt += 1
                d = self._backoff(attempt, e)
                log.warning("claim failed; retrying in %.1fs: %s", d, e)
                self._stopping.wait(d)
                continue
            self._unknown_claim = None
            attempt = 0
            tasks = list(r.get("tasks") or [])
            self._release(n - len(tasks))
            self._launch(tasks)

    def _release(self, n: int) -> None:
        for _ in range(max(0, n)):
            self._free.release()

    def _launch(self, tasks: List[Dict[str, Any]]) -> None:
        for c in tasks:
            self._count("claimed")
            with self._inflight_cv:
                self._inflight += 1
            self._pool.submit(self._slot, c)

    def _slot(self, c: Optional[Dict[str, Any]]) -> None:
        try:
            while c is not None:
                c = self._execute(c)
        except Exception:  # noqa: BLE001 - a bug here must not lose the slot
            log.exception("worker bug while running a task")
        finally:
            self._free.release()
            with self._inflight_cv:
                self._inflight -= 1
                self._inflight_cv.notify_all()

    def _drain(self) -> None:
        end = time.monotonic() + self.drain_timeout
        with self._inflight_cv:
            while self._inflight > 0 and not self._hard.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._inflight_cv.wait(min(left, 0.5))
            if self._inflight == 0:
                log.info("drained; all in-flight tasks reported")
                return
        if not self._hard.is_set():
            log.warning("drain timed out; abandoning in-flight tasks (their leases will expire and they will be retried)")
        self._stop_hard()
        with self._inflight_cv:
            while self._inflight > 0:
                self._inflight_cv.wait(0.5)

    def _shutdown(self) -> None:
        self._hb.close()
        self._pool.shutdown(wait=False)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._claims.close()
        self._client.close()

    # -- one task ------------------------------------------------------------------

    def _async_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()

                def serve() -> None:
                    loop.run_forever()
                    loop.close()

                threading.Thread(target=serve, name="flowd-asyncio", daemon=True).start()
                self._loop = loop
            return self._loop

    def _execute(self, c: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        t = TaskContext(self, c)
        spec = self._registry.handlers.get(t.type)
        if spec is None:
            msg = (f"no handler for task type {t.type!r} on worker {self.id} "
                   f"(registered: {', '.join(self.types)})")
            self._report("task.fail", {"task_id": t.id, "fencing_token": t.fencing_token, "error": msg,
                                       "retryable": False}, t)
            return None
        now = time.monotonic()
        local_timeout = False
        if t.timeout_ms > 0:
            t.deadline = now + t.timeout_ms / 1000.0
        if spec.timeout is not None and (t.deadline is None or now + spec.timeout < t.deadline):
            t.deadline = now + spec.timeout
            local_timeout = True
        self._running[id(t)] = t
        self._hb.add(t)
        result: Any = None
        error: Optional[BaseException] = None
        token = current_task.set(t)
        try:
            if spec.is_async:
                result = self._call_async(spec.fn, t)
            else:
                result = spec.fn(t)
        except BaseException as e:  # noqa: BLE001 - every handler failure is reported
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            error = e
        finally:
            current_task.reset(token)
            with t._lock:
                t._done = True
            self._running.pop(id(t), None)
        logs, _ = t._log.take()
        if t.cancelled.is_set():
            reason = t.cancel_reason
            if reason == "timeout" and local_timeout:
                self._count("timed_out")
                err = f"handler timeout: the handler ran past its {spec.timeout}s timeout"
                self._report("task.fail", dict(logs, task_id=t.id, fencing_token=t.fencing_token, error=err,
                                               retryable=True), t)
                return None
            if reason == "timeout":
                self._count("timed_out")
                log.warning("task %s ran past its timeout_ms; result discarded (the cluster fails the attempt)", t.id)
            else:
                self._count("discarded")
                log.warning("task %s: %s while running; result discarded", t.id, reason)
            return None
        if error is not None:
            retryable = not isinstance(error, NonRetryable)
            msg = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            t._log.add(tb, "stderr")
            logs, _ = t._log.take()
            self._count("failed")
            self._report("task.fail", dict(logs, task_id=t.id, fencing_token=t.fencing_token, error=msg,
                                           retryable=retryable), t)
            return None
        done: Dict[str, Any] = dict(logs, task_id=t.id, fencing_token=t.fencing_token)
        if result is not None:
            done["result"] = result
        if t._spawn:
            done["spawn"] = list(t._spawn)
        if self.claim_on_complete and not self._stopping.is_set():
            p = dict(done)
            p["claim"] = self._claim_params(1)
            p["claim"].pop("slots", None)
            p["claim"]["request_id"] = secrets.token_hex(12)
            try:
                r = self._client.call("task.complete", p, mode=_client.UNSENT, timeout=15.0)
            except (TypeError, ValueError) as e:  # raised while encoding, before anything was sent
                self._not_json(t, logs, e)
                return None
            except FlowdError as e:
                if self._hard.is_set():
                    return None
                # Outcome unknown: report the completion alone (repeat-safe by token).
                log.debug("complete-and-claim failed; reporting the result alone: %s", e)
            else:
                self._acked(r, t)
                nxt = r.get("tasks") or []
                if nxt:
                    self._count("claimed")
                    return dict(nxt[0])
                return None
        try:
            self._report("task.complete", done, t)
        except (TypeError, ValueError) as e:
            self._not_json(t, logs, e)
        return None

    def _not_json(self, t: TaskContext, logs: Dict[str, Any], e: Exception) -> None:
        self._count("failed")
        self._report("task.fail", dict(logs, task_id=t.id, fencing_token=t.fencing_token,
                                       error=f"result is not JSON: {e}", retryable=False), t)

    def _acked(self, r: Mapping[str, Any], t: TaskContext) -> None:
        if r.get("accepted"):
            self._count("completed")
        else:
            self._count("rejected")
            log.warning("result of %s rejected: the lease was lost (stale fencing token)", t.id)

    def _call_async(self, fn: Handler, t: TaskContext) -> Any:
        loop = self._async_loop()

        async def runner() -> Any:
            current_task.set(t)
            return await fn(t)

        fut = asyncio.run_coroutine_threadsafe(runner(), loop)
        t._async_cancel = lambda: None if fut.cancel() else None
        if t.cancelled.is_set():
            fut.cancel()
        try:
            return fut.result()
        except FutureCancelled:
            raise asyncio.CancelledError() from None

    def _report(self, method: str, params: Dict[str, Any], t: TaskContext) -> None:
        """Send a completion or failure, retrying through failovers until
        the cluster answers (accepted or rejected) or the worker stops hard."""
        attempt = 0
        while True:
            attempt += 1
            try:
                r = self._client.call(method, params, mode=_client.ALL, timeout=15.0)
            except FlowdError as e:
                if self._hard.is_set() or not is_unavailable(e):
                    log.error("could not report the outcome of %s: %s", t.id, e)
                    return
                self._hard.wait(self._backoff(attempt, e))
                continue
            if method == "task.complete":
                self._acked(r, t)
            elif not r.get("accepted"):
                self._count("rejected")
                log.warning("failure of %s rejected: the lease was lost (stale fencing token)", t.id)
            return
