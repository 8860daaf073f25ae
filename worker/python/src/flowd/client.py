"""The flowd client: calls, leader-aware routing, retries, and the run API.

See docs/python.md. The protocol is docs/rpc.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import queue
import random
import secrets
import tempfile
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _yaml
from ._conn import Conn, TLSOptions, env_tls, parse_endpoint, split_endpoints
from ._route import LOCAL, route_of
from .errors import (ConnectionLost, FlowdError, NotFound, RPCError, RunFailed, Timeout, Unavailable,
                     ClientClosed)

__all__ = ["Client", "EventsLost", "new_run_id", "load_spec", "default_addr", "DONE_STATES"]

#: Run states in which a run is done (``run.wait`` returns).
DONE_STATES = frozenset({"succeeded", "failed", "cancelled", "reverted"})

# Retry modes of a call (as the Go client's Call, CallResendable, CallIdempotent).
UNSENT = "unsent"  # retried only when the request was certainly not sent
LOST = "lost"  # also after a lost connection (safe to send again), not after -32004
ALL = "all"  # also after -32004 (repeat-safe: reads, writes made idempotent by an id)

Spec = Union[Mapping[str, Any], str, "os.PathLike[str]"]


class EventsLost(FlowdError):
    """The subscriber fell behind the retained event window; ``oldest_index`` is where to resume."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(str(params.get("message") or "events lost"))
        self.oldest_index = int(params.get("oldest_index") or 0)


def default_addr() -> str:
    """FLOWD_ADDR, or the sockets of the default ``flowd dev`` cluster (as the CLI)."""
    env = os.environ.get("FLOWD_ADDR", "").strip()
    if env:
        return env
    d = os.path.join(tempfile.gettempdir(), "flowd-dev")
    return ",".join(f"unix://{d}/n{i}.sock" for i in (1, 2, 3))


def new_run_id() -> str:
    """A new UUIDv7 (time-ordered, as the agent picks them)."""
    ms = int(time.time() * 1000)
    rnd = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rnd >> 68 & 0xFFF) << 64 | 0b10 << 62 | (rnd & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def load_spec(spec: Spec) -> Dict[str, Any]:
    """A workflow spec: a mapping as is, or a path to a JSON or YAML file."""
    if isinstance(spec, Mapping):
        return dict(spec)
    path = os.fspath(spec)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json") or text.lstrip().startswith("{"):
        out = json.loads(text)
    else:
        try:
            out = _yaml.loads(text)
        except (ValueError, IndexError) as e:
            raise ValueError(f"{path}: cannot read this YAML ({e}); write the spec as JSON instead") from None
    if not isinstance(out, dict):
        raise ValueError(f"{path}: a workflow spec is an object with 'tasks'")
    return out


def _ms(v: Union[None, float, int, _dt.timedelta]) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, _dt.timedelta):
        return int(v.total_seconds() * 1000)
    return int(float(v) * 1000)


def _rfc3339(v: Union[str, _dt.datetime]) -> str:
    if isinstance(v, str):
        return v
    if v.tzinfo is None:
        v = v.replace(tzinfo=_dt.timezone.utc)
    return v.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _backoff(attempt: int, base: float, cap: float, err: Optional[BaseException]) -> float:
    d = random.uniform(0, min(cap, base * (2 ** min(attempt, 20))))
    if isinstance(err, Unavailable):
        d = max(d, err.retry_after_ms / 1000.0)
    return d


def _clean(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Client:
    """A client of one flowd cluster.

    ``addr`` is a comma-separated string or a list of endpoints
    (``unix:///path``, ``/path``, ``tcp://host:port``, ``tls://host:port``);
    default ``FLOWD_ADDR`` or the ``flowd dev`` sockets. ``token``
    (default ``FLOWD_TOKEN``) authenticates TCP connections with
    ``agent.auth``; ``ca_cert`` (``FLOWD_CACERT``) verifies a ``tls://``
    agent, ``client_cert``/``client_key`` (``FLOWD_CLIENT_CERT``/``_KEY``)
    present a client certificate. ``timeout`` is each call's deadline.

    With several endpoints and ``route="leader"`` (default, or
    ``FLOWD_ROUTE``) writes, long polls and reads of the replicated state go
    straight to the leader's endpoint; other calls (and everything with
    ``route="any"``) go to the current endpoint, which forwards them. The
    client re-learns the leader when its connection fails, when it answers
    -32004, and every ``leader_check`` seconds.

    Thread-safe: calls from several threads share the connections and are
    pipelined (matched by id). Use as a context manager or call close().
    """

    def __init__(self, addr: Union[None, str, Sequence[str]] = None, *, token: Optional[str] = None,
                 ca_cert: Optional[str] = None, client_cert: Optional[str] = None, client_key: Optional[str] = None,
                 timeout: float = 10.0, route: Optional[str] = None, leader_check: float = 5.0,
                 max_attempts: int = 8, backoff_base: float = 0.05, backoff_cap: float = 5.0,
                 dial_timeout: float = 2.0, name: str = "flowd-python") -> None:
        self.endpoints: List[str] = split_endpoints(addr if addr is not None else default_addr())
        if not self.endpoints:
            raise ValueError("no endpoint: pass addr or set FLOWD_ADDR (e.g. unix:///tmp/flowd-dev/n1.sock)")
        for ep in self.endpoints:
            parse_endpoint(ep)
        env = env_tls()
        self.tls = TLSOptions(ca_cert or env.ca_cert, client_cert or env.client_cert, client_key or env.client_key)
        self.token = token if token is not None else (os.environ.get("FLOWD_TOKEN") or None)
        self.timeout = timeout
        route = route or os.environ.get("FLOWD_ROUTE") or "leader"
        if route not in ("leader", "any"):
            raise ValueError(f"route {route!r}: want 'leader' or 'any'")
        self.routing = route == "leader" and len(self.endpoints) > 1
        self.leader_check = leader_check
        self.max_attempts = max(1, max_attempts)
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.dial_timeout = dial_timeout
        self.name = name
        self._lock = threading.Lock()
        self._conns: Dict[str, Conn] = {}
        self._dialing: Dict[str, threading.Lock] = {ep: threading.Lock() for ep in self.endpoints}
        self._idx = 0
        self._leader: Optional[str] = None
        self._learn_lock = threading.Lock()
        self._learn_after = 0.0
        self._checked = 0.0
        self._closed = False
        self._no_dial = False

    # -- lifecycle ----------------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close("client closed")

    def half_close(self) -> None:
        """Half-close every connection and make no new ones: calls already
        sent are answered (a waiting claim answers what it leased at once),
        later calls fail with ClientClosed."""
        with self._lock:
            self._no_dial = True
            conns = list(self._conns.values())
        for c in conns:
            c.close_write()

    def reset(self) -> None:
        """Close every connection and forget the leader (calls in flight
        fail with ConnectionLost): the next call dials afresh, starting
        with the next endpoint. For a connection that stopped answering."""
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
            self._leader = None
            self._idx = (self._idx + 1) % len(self.endpoints)
        for c in conns:
            c.close("reset: the agent stopped answering")

    @property
    def endpoint(self) -> str:
        """The current endpoint (local calls and subscriptions)."""
        with self._lock:
            return self.endpoints[self._idx]

    @property
    def leader_endpoint(self) -> Optional[str]:
        """The leader's endpoint as last learned (None: unknown)."""
        return self._leader

    # -- connections ----------------------------------------------------------

    def _conn(self, ep: str) -> Conn:
        with self._lock:
            if self._closed:
                raise ClientClosed("the client is closed")
            c = self._conns.get(ep)
            if c is not None and not c.closed:
                return c
        with self._dialing[ep]:
            with self._lock:
                c = self._conns.get(ep)
                if c is not None and not c.closed:
                    return c
                if self._no_dial:
                    raise ClientClosed("the client makes no new connections (its worker is stopping)")
            c = Conn.dial(ep, self.dial_timeout, self.tls, self.token)
            with self._lock:
                if self._closed:
                    c.close("client closed")
                    raise ClientClosed("the client is closed")
                self._conns[ep] = c
            return c

    def _drop(self, ep: str, why: str) -> None:
        with self._lock:
            c = self._conns.pop(ep, None)
            if self.endpoints[self._idx] == ep and len(self.endpoints) > 1:
                self._idx = (self._idx + 1) % len(self.endpoints)
            if self._leader == ep:
                self._leader = None
        if c is not None:
            c.close(why)

    def _learn(self) -> None:
        """Find the leader's endpoint with agent.hello (one learner at a time)."""
        if not self._learn_lock.acquire(timeout=self.dial_timeout * 2):
            return
        try:
            if self._leader is not None:
                return
            nodes: Dict[str, str] = {}
            leader_id = ""
            start = self._idx
            order = self.endpoints[start:] + self.endpoints[:start]
            for ep in order:
                try:
                    r = self._conn(ep).call("agent.hello", {"protocol_version": 1, "client": self.name},
                                            timeout=self.dial_timeout)
                except (ConnectionLost, Timeout):
                    self._drop(ep, "unreachable while learning the leader")
                    continue
                except RPCError:
                    continue
                nodes[r.get("node_id", "")] = ep
                leader_id = leader_id or r.get("leader_id", "")
                if leader_id and leader_id in nodes:
                    self._leader = nodes[leader_id]
                    self._checked = time.monotonic()
                    return
            # No leader (an election): look again soon. A leader that is not
            # among our endpoints: the agents forward; look again later.
            everyone = len(nodes) == len(self.endpoints)
            self._learn_after = time.monotonic() + (max(self.leader_check, 0.25) if leader_id and everyone else 0.25)
        finally:
            self._learn_lock.release()

    def _check_leader(self, ep: str) -> None:
        try:
            r = self._conn(ep).call("agent.hello", {"protocol_version": 1, "client": self.name}, timeout=self.dial_timeout)
            if r.get("node_id") != r.get("leader_id") and self._leader == ep:
                self._leader = None
        except FlowdError:
            if self._leader == ep:
                self._leader = None

    def _target(self, method: str) -> str:
        if not self.routing or route_of(method) == LOCAL:
            return self.endpoint
        if self._leader is None and time.monotonic() >= self._learn_after:
            self._learn()
        ep = self._leader
        if ep is None:
            return self.endpoint
        now = time.monotonic()
        if self.leader_check > 0 and now - self._checked > self.leader_check:
            self._checked = now
            threading.Thread(target=self._check_leader, args=(ep,), daemon=True).start()
        return ep

    # -- calls ----------------------------------------------------------------

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *, timeout: Optional[float] = None,
             mode: str = UNSENT) -> Any:
        """Call ``method`` and return its result; raise its RPCError.

        ``mode`` says what may be retried: ``"unsent"`` (default: only a
        request that was certainly not sent), ``"lost"`` (also after a lost
        connection: the request is safe to send again), ``"all"`` (also
        after -32004 unavailable, waiting its ``retry_after_ms``: reads and
        writes made idempotent by a client-chosen id). Retries move to the
        next endpoint and re-learn the leader; they stop after
        ``max_attempts`` or at the deadline (``timeout``, default the
        client's)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        attempt = 0
        while True:
            attempt += 1
            ep = self._target(method)
            err: BaseException
            try:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Timeout(f"{method}: the call's deadline passed")
                return self._conn(ep).call(method, params, timeout=remaining)
            except ConnectionLost as e:
                self._drop(ep, str(e))
                if e.sent and mode == UNSENT:
                    raise
                err = e
            except Unavailable as e:
                if mode != ALL:
                    raise
                with self._lock:
                    if self._leader == ep:
                        self._leader = None
                if ep == self.endpoint and len(self.endpoints) > 1:
                    self._drop(ep, "the agent answered -32004 (it may be cut off from the leader)")
                err = e
            pause = _backoff(attempt, self.backoff_base, self.backoff_cap, err)
            if attempt >= self.max_attempts or time.monotonic() + pause >= deadline:
                raise err
            time.sleep(pause)

    # -- agent and cluster ---------------------------------------------------------

    def hello(self) -> Dict[str, Any]:
        """agent.hello on the current endpoint: ``node_id``, ``leader_id``, ``version``."""
        return self.call("agent.hello", {"protocol_version": 1, "client": self.name}, mode=ALL)  # type: ignore[no-any-return]

    def cluster_status(self) -> Dict[str, Any]:
        return self.call("cluster.status", {}, mode=ALL)  # type: ignore[no-any-return]

    def cluster_stats(self) -> Dict[str, Any]:
        return self.call("cluster.stats", {}, mode=ALL)  # type: ignore[no-any-return]

    def workers(self) -> List[Dict[str, Any]]:
        return list(self.call("workers.list", {}, mode=ALL).get("workers") or [])

    def queues(self) -> List[Dict[str, Any]]:
        return list(self.call("queue.list", {}, mode=ALL).get("queues") or [])

    def settings(self) -> Dict[str, Any]:
        return self.call("settings.get", {}, mode=ALL)  # type: ignore[no-any-return]

    def set_settings(self, **values: Any) -> Dict[str, Any]:
        return self.call("settings.set", values, mode=ALL)  # type: ignore[no-any-return]

    # -- runs -----------------------------------------------------------------

    def submit(self, spec: Optional[Spec] = None, input: Any = None, *, labels: Optional[Mapping[str, str]] = None,
               client_id: Optional[str] = None, delay: Union[None, float, _dt.timedelta] = None,
               start_at: Union[None, str, _dt.datetime] = None, definition: Optional[str] = None,
               if_full: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Submit a run: ``spec`` (a mapping or a JSON/YAML file path) or a
        stored ``definition`` (``"name"`` or ``"name@version"``).

        ``client_id`` is the run's id (default: a new UUIDv7); the call is
        retried with it, so a retry never creates a second run. ``delay``
        (seconds or timedelta) or ``start_at`` (datetime or RFC 3339) delay
        the start. Returns ``{id, state, created, index}``."""
        if (spec is None) == (definition is None):
            raise ValueError("give exactly one of spec and definition")
        params: Dict[str, Any] = {"id": client_id or new_run_id(), "nonce": secrets.token_hex(12)}
        if spec is not None:
            params["workflow"] = load_spec(spec)
        params.update(_clean({"definition": definition, "input": input, "labels": dict(labels) if labels else None,
                              "delay_ms": _ms(delay), "start_at": _rfc3339(start_at) if start_at else None,
                              "if_full": if_full}))
        return self.call("run.submit", params, mode=ALL, timeout=timeout)  # type: ignore[no-any-return]

    def get(self, run_id: str, *, consistent: bool = False) -> Dict[str, Any]:
        """run.get: the run with its tasks and frozen spec."""
        return self.call("run.get", _clean({"id": run_id, "consistent": consistent or None}), mode=ALL)  # type: ignore[no-any-return]

    def list(self, *, state: Optional[str] = None, selector: Optional[str] = None, workflow: Optional[str] = None,
             labels: Optional[Mapping[str, str]] = None, definition: Optional[str] = None,
             created_after: Union[None, str, _dt.datetime] = None,
             created_before: Union[None, str, _dt.datetime] = None, page_size: int = 100,
             consistent: bool = False) -> Iterator[Dict[str, Any]]:
        """Runs newest first, across pages (an iterator; fetches lazily)."""
        params = _clean({"state": state, "selector": selector, "workflow": workflow,
                         "labels": dict(labels) if labels else None, "definition": definition,
                         "created_after": _rfc3339(created_after) if created_after else None,
                         "created_before": _rfc3339(created_before) if created_before else None,
                         "limit": page_size, "consistent": consistent or None})
        while True:
            page = self.call("run.list", params, mode=ALL)
            for r in page.get("runs") or []:
                yield r
            cursor = page.get("next_cursor")
            if not cursor:
                return
            params["cursor"] = cursor

    def wait(self, run_id: str, timeout: Optional[float] = None, *, raise_on_failure: bool = False,
             poll: float = 60.0) -> Dict[str, Any]:
        """Wait until the run is done (succeeded, failed, cancelled,
        reverted) and return it (with tasks). Long-polls ``run.wait`` on the
        leader, re-issued across failovers. ``timeout`` None waits forever;
        past it, :class:`flowd.Timeout` is raised (its ``run`` is the last
        state seen). ``raise_on_failure``: raise :class:`RunFailed` unless
        the run succeeded."""
        end = None if timeout is None else time.monotonic() + timeout
        fresh_until = time.monotonic() + 5.0
        run: Dict[str, Any] = {}
        while True:
            left = poll if end is None else min(poll, max(0.0, end - time.monotonic()))
            try:
                r = self.call("run.wait", {"id": run_id, "timeout_ms": int(left * 1000)}, mode=ALL,
                              timeout=left + max(self.timeout, 5.0))
            except NotFound:
                if time.monotonic() < fresh_until:  # a run created a moment ago through another agent
                    time.sleep(0.1)
                    continue
                raise
            except (Unavailable, ConnectionLost, Timeout):
                if end is not None and time.monotonic() >= end:
                    raise
                time.sleep(0.2)
                continue
            run = r.get("run") or {}
            if r.get("done"):
                if raise_on_failure and run.get("state") != "succeeded":
                    raise RunFailed(run)
                return run
            if end is not None and time.monotonic() >= end:
                t = Timeout(f"run {run_id} is not done after {timeout}s (state {run.get('state')})")
                t.run = run  # type: ignore[attr-defined]
                raise t

    def run(self, spec: Optional[Spec] = None, input: Any = None, *, timeout: Optional[float] = None,
            **submit_args: Any) -> Dict[str, Any]:
        """Submit and wait: the finished run."""
        r = self.submit(spec, input, **submit_args)
        return self.wait(r["id"], timeout)

    def cancel(self, run_id: str, reason: Optional[str] = None) -> Dict[str, Any]:
        return self.call("run.cancel", _clean({"id": run_id, "reason": reason}), mode=ALL)  # type: ignore[no-any-return]

    def interrupt(self, run_id: str) -> Dict[str, Any]:
        return self.call("run.interrupt", {"id": run_id}, mode=ALL)  # type: ignore[no-any-return]

    def resume(self, run_id: str) -> Dict[str, Any]:
        return self.call("run.resume", {"id": run_id}, mode=ALL)  # type: ignore[no-any-return]

    def revert(self, run_id: str, reason: Optional[str] = None) -> Dict[str, Any]:
        return self.call("run.revert", _clean({"id": run_id, "reason": reason}), mode=ALL)  # type: ignore[no-any-return]

    def replay(self, run_id: str, input: Any = None, *, reuse_succeeded: bool = False,
               new_id: Optional[str] = None) -> Dict[str, Any]:
        """A new run from the run's frozen spec (``parent_id`` = run_id); safe to retry (``new_id``)."""
        return self.call("run.replay", _clean({"id": run_id, "new_id": new_id or new_run_id(), "input": input,  # type: ignore[no-any-return]
                                               "reuse_succeeded": reuse_succeeded or None}), mode=ALL)

    def retry(self, run_id: str, task: Optional[str] = None) -> Dict[str, Any]:
        """Run a failed or cancelled run again in place (``run.retry``): its
        failed and cancelled tasks (or only ``task``) go back to pending, the
        run back to running, the same run id; what succeeded keeps its
        result. Sent at most once (a repeat after it took effect is refused
        because the run is running again): read the run to learn whether a
        call that got no answer took effect."""
        return self.call("run.retry", _clean({"id": run_id, "task": task}), mode=UNSENT)  # type: ignore[no-any-return]

    def stats(self, run_id: str) -> Dict[str, Any]:
        return self.call("run.stats", {"id": run_id}, mode=ALL)  # type: ignore[no-any-return]

    def signal(self, run_id: str, name: Optional[str] = None, payload: Any = None, *, key: Optional[str] = None,
               signal_id: Optional[str] = None) -> Dict[str, Any]:
        """Complete waiting ``wait`` tasks: by signal ``name`` (run.signal)
        or one task by ``key`` (task.signal). ``payload`` becomes the
        result. Idempotent by ``signal_id`` (default: a fresh one, reused
        on this call's retries)."""
        sid = signal_id or secrets.token_hex(12)
        if key is not None:
            return self.call("task.signal", _clean({"run_id": run_id, "key": key, "payload": payload,  # type: ignore[no-any-return]
                                                    "signal_id": sid}), mode=ALL)
        if name is None:
            raise ValueError("give the signal's name or the task's key")
        return self.call("run.signal", _clean({"run_id": run_id, "name": name, "payload": payload,  # type: ignore[no-any-return]
                                               "signal_id": sid}), mode=ALL)

    # -- tasks ----------------------------------------------------------------

    def task(self, task_id: str) -> Dict[str, Any]:
        """task.get: a task with its input and attempts; ``"<run>/<key>"``."""
        return self.call("task.get", {"id": task_id}, mode=ALL)  # type: ignore[no-any-return]

    def task_logs(self, run_id: str, key: str, attempt: Optional[int] = None) -> Dict[str, Any]:
        return self.call("task.logs", _clean({"run": run_id, "key": key, "attempt": attempt}), mode=ALL)  # type: ignore[no-any-return]

    # -- definitions ----------------------------------------------------------------

    def put_definition(self, spec: Spec, *, name: Optional[str] = None, version: Optional[int] = None,
                       note: Optional[str] = None) -> Dict[str, Any]:
        return self.call("definition.put", _clean({"workflow": load_spec(spec), "name": name, "version": version,  # type: ignore[no-any-return]
                                                   "note": note}), mode=ALL)

    def get_definition(self, name: str, version: Optional[int] = None, *, versions: bool = False) -> Dict[str, Any]:
        return self.call("definition.get", _clean({"name": name, "version": version,  # type: ignore[no-any-return]
                                                   "versions": versions or None}), mode=ALL)

    def list_definitions(self) -> List[Dict[str, Any]]:
        return list(self.call("definition.list", {}, mode=ALL).get("definitions") or [])

    # -- schedules ----------------------------------------------------------------

    def create_schedule(self, id: str, spec: Spec, *, cron: Optional[str] = None,
                        interval: Union[None, float, _dt.timedelta] = None, time_zone: Optional[str] = None,
                        input: Any = None, labels: Optional[Mapping[str, str]] = None, overlap: Optional[str] = None,
                        catchup_window: Union[None, float, _dt.timedelta] = None, paused: bool = False,
                        note: Optional[str] = None) -> Dict[str, Any]:
        """schedule.create (idempotent by ``id``): ``cron`` or ``interval`` (seconds)."""
        return self.call("schedule.create", _clean({  # type: ignore[no-any-return]
            "id": id, "workflow": load_spec(spec), "cron": cron, "interval_ms": _ms(interval), "time_zone": time_zone,
            "input": input, "labels": dict(labels) if labels else None, "overlap": overlap,
            "catchup_window_ms": _ms(catchup_window), "paused": paused or None, "note": note}), mode=ALL)

    def get_schedule(self, id: str, next: Optional[int] = None) -> Dict[str, Any]:
        return self.call("schedule.get", _clean({"id": id, "next": next}), mode=ALL)  # type: ignore[no-any-return]

    def list_schedules(self) -> List[Dict[str, Any]]:
        return list(self.call("schedule.list", {}, mode=ALL).get("schedules") or [])

    def pause_schedule(self, id: str, note: Optional[str] = None) -> Dict[str, Any]:
        return self.call("schedule.pause", _clean({"id": id, "note": note}), mode=ALL)  # type: ignore[no-any-return]

    def resume_schedule(self, id: str, note: Optional[str] = None) -> Dict[str, Any]:
        return self.call("schedule.resume", _clean({"id": id, "note": note}), mode=ALL)  # type: ignore[no-any-return]

    def trigger_schedule(self, id: str, run_id: Optional[str] = None) -> Dict[str, Any]:
        return self.call("schedule.trigger", {"id": id, "run_id": run_id or new_run_id()}, mode=ALL)  # type: ignore[no-any-return]

    def delete_schedule(self, id: str) -> Dict[str, Any]:
        return self.call("schedule.delete", {"id": id}, mode=ALL)  # type: ignore[no-any-return]

    # -- events ----------------------------------------------------------------

    def events(self, run_id: Optional[str] = None, from_index: int = 0, *,
               idle_timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """Event notifications as a generator, in ``(index, seq)`` order,
        each once. The stream lives on a connection of its own; when it
        breaks (the agent died) the generator subscribes again on the next
        endpoint from the last index it delivered and drops what it already
        gave, so no event is lost or repeated. ``idle_timeout``: stop after
        that many seconds without an event. Raises :class:`EventsLost`
        when the stream fell behind the retained window."""
        last: Optional[Tuple[int, int]] = None
        i = self._idx
        attempt = 0
        idle_since = time.monotonic()
        while True:
            ep = self.endpoints[i % len(self.endpoints)]
            q: "queue.Queue[Tuple[str, Any]]" = queue.Queue()
            try:
                conn = Conn.dial(ep, self.dial_timeout, self.tls, self.token,
                                 on_notify=lambda m, p: q.put((m, p)))
            except ConnectionLost as e:
                i += 1
                attempt += 1
                if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                    return
                time.sleep(_backoff(attempt, 0.1, 2.0, e))
                continue
            try:
                start = last[0] if last else from_index
                try:
                    sub = conn.call("events.subscribe", _clean({"run_id": run_id, "from_index": start or None}),
                                    timeout=self.timeout)
                except (ConnectionLost, Unavailable, Timeout) as e:
                    i += 1
                    attempt += 1
                    time.sleep(_backoff(attempt, 0.1, 2.0, e))
                    continue
                attempt = 0
                if not from_index and last is None:
                    # "only new events": a stream that breaks before its first
                    # event resumes where this one started, not at the new now.
                    from_index = int(sub.get("from_index") or 0)
                while True:
                    try:
                        m, p = q.get(timeout=0.25)
                    except queue.Empty:
                        if conn.closed:
                            break
                        if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                            return
                        continue
                    if m == "event" and isinstance(p, dict):
                        key = (int(p.get("index", 0)), int(p.get("seq", 0)))
                        if last is not None and key <= last:
                            continue
                        last = key
                        idle_since = time.monotonic()
                        yield p
                    elif m == "events.lost" and isinstance(p, dict):
                        raise EventsLost(p)
                i += 1  # the agent went away: resume on the next one
            finally:
                conn.close("event stream closed")
