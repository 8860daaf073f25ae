"""One connection to one agent: newline-delimited JSON-RPC 2.0, pipelined.

Requests on a connection run concurrently at the agent and their answers
may come back in any order, so every request gets a fresh id and a reader
thread hands each answer to the caller waiting on that id. Notifications
(``event``, ``events.lost``) go to ``on_notify`` on the reader thread.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import ssl
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import ConnectionLost, RPCError, Timeout, error_from_response

Notify = Callable[[str, Any], None]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_loads = json.loads

# The longest answer line accepted (the agent's --max-line default is 4 MiB;
# a result is never longer than it).
MAX_LINE = 64 << 20


def parse_endpoint(ep: str) -> Tuple[str, str]:
    """Split an endpoint as the CLI does: ``unix:///path``, ``/path``,
    ``tcp://host:port`` (plaintext, or TLS when a CA is given) and
    ``tls://host:port``. Returns (scheme, address)."""
    ep = ep.strip()
    if ep.startswith("unix://"):
        scheme, addr = "unix", ep[len("unix://"):]
    elif ep.startswith("tcp://") or ep.startswith("tls://"):
        scheme, addr = ep[:3], ep[len("tcp://"):]
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"endpoint {ep!r}: want {scheme}://host:port")
    elif "://" in ep:
        raise ValueError(f"endpoint {ep!r}: unknown scheme (use unix:///path, /path, tcp://host:port or tls://host:port)")
    else:
        scheme, addr = "unix", ep
    if not addr:
        raise ValueError(f"endpoint {ep!r} has no address")
    return scheme, addr


def split_endpoints(addr: Any) -> List[str]:
    """A comma-separated string or a list of endpoints, as a list."""
    items = addr.split(",") if isinstance(addr, str) else list(addr)
    out = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if part:
                out.append(part)
    return out


class TLSOptions:
    """How to reach a ``tls://`` endpoint: the cluster CA (the agent's
    certificate must be signed by it; its host name is not checked, as the
    Go client does), and optionally a client certificate."""

    def __init__(self, ca_cert: Optional[str] = None, client_cert: Optional[str] = None,
                 client_key: Optional[str] = None) -> None:
        self.ca_cert = ca_cert
        self.client_cert = client_cert
        self.client_key = client_key
        self._ctx: Optional[ssl.SSLContext] = None

    def context(self) -> ssl.SSLContext:
        if self._ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.check_hostname = False  # a node's certificate names its node id, not the address dialled
            ctx.verify_mode = ssl.CERT_REQUIRED
            if self.ca_cert:
                ctx.load_verify_locations(cafile=self.ca_cert)
            else:
                ctx.load_default_certs()
            if self.client_cert:
                ctx.load_cert_chain(self.client_cert, self.client_key or None)
            self._ctx = ctx
        return self._ctx


class Conn:
    """A connected agent. Thread-safe; ``call`` may be used from any thread."""

    def __init__(self, endpoint: str, sock: socket.socket, reader: Any, on_notify: Optional[Notify]) -> None:
        self.endpoint = endpoint
        self._sock = sock
        self._rfile = reader
        self._on_notify = on_notify
        self._wlock = threading.Lock()
        self._plock = threading.Lock()
        self._pending: Dict[int, "Future[Any]"] = {}
        self._ids = itertools.count(1)
        self._closed: Optional[str] = None
        self.node_id = ""
        self._reader = threading.Thread(target=self._read_loop, name=f"flowd-conn-{endpoint}", daemon=True)
        self._reader.start()

    # -- dialling ---------------------------------------------------------

    @classmethod
    def dial(cls, endpoint: str, timeout: float = 2.0, tls: Optional[TLSOptions] = None,
             token: Optional[str] = None, on_notify: Optional[Notify] = None) -> "Conn":
        """Connect (and authenticate with ``token`` on a TCP endpoint).
        Raises ConnectionLost(sent=False) when the agent cannot be reached."""
        scheme, addr = parse_endpoint(endpoint)
        sock: Optional[socket.socket] = None
        try:
            if scheme == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                sock.connect(addr)
            else:
                host, _, port = addr.rpartition(":")
                sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if scheme == "tls" or (tls is not None and tls.ca_cert):
                    sock = (tls or TLSOptions()).context().wrap_socket(sock, server_hostname=host.strip("[]"))
            reader = sock.makefile("rb", buffering=1 << 16)
            if token and scheme != "unix":
                _authenticate(endpoint, sock, reader, token)
            sock.settimeout(None)
        except (OSError, ssl.SSLError) as e:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
            raise ConnectionLost(endpoint, str(e) or type(e).__name__, sent=False) from None
        except RPCError:
            try:
                sock.close()  # type: ignore[union-attr]
            except OSError:
                pass
            raise
        return cls(endpoint, sock, reader, on_notify)

    # -- calls --------------------------------------------------------------

    def send(self, method: str, params: Any = None) -> Tuple[int, "Future[Any]"]:
        """Write a request; the returned future resolves to its result (or
        raises its RPCError / ConnectionLost)."""
        fut: "Future[Any]" = Future()
        rid = next(self._ids)
        req: Dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = params
        line = (_dumps(req) + "\n").encode("utf-8")
        fut.method = method  # type: ignore[attr-defined]
        with self._plock:
            if self._closed is not None:
                raise ConnectionLost(self.endpoint, self._closed, sent=False)
            self._pending[rid] = fut
        try:
            with self._wlock:
                self._sock.sendall(line)
        except OSError as e:
            with self._plock:
                self._pending.pop(rid, None)
            self.close(f"write failed: {e}")
            raise ConnectionLost(self.endpoint, f"write failed: {e}", sent=False) from None
        return rid, fut

    def call(self, method: str, params: Any = None, timeout: Optional[float] = None) -> Any:
        rid, fut = self.send(method, params)
        try:
            return fut.result(timeout)
        except FutureTimeout:
            with self._plock:
                self._pending.pop(rid, None)
            raise Timeout(f"{method}: no answer from {self.endpoint} within {timeout:.1f}s") from None

    def forget(self, rid: int) -> None:
        with self._plock:
            self._pending.pop(rid, None)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def close_write(self) -> None:
        """Half-close: the agent answers what it was asked (a waiting claim
        stops waiting and answers what it leased), then closes."""
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self, why: str = "closed") -> None:
        with self._plock:
            if self._closed is not None:
                return
            self._closed = why
            pending, self._pending = self._pending, {}
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost(self.endpoint, why, sent=True))

    # -- reading ------------------------------------------------------------

    def _read_loop(self) -> None:
        why = "connection closed by the agent"
        try:
            while True:
                line = self._rfile.readline(MAX_LINE)
                if not line:
                    break
                if not line.endswith(b"\n") and len(line) >= MAX_LINE:
                    why = "answer line over the client's limit"
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = _loads(line)
                except ValueError:
                    continue
                if isinstance(msg, list):
                    for m in msg:
                        if isinstance(m, dict):
                            self._dispatch(m)
                elif isinstance(msg, dict):
                    self._dispatch(msg)
        except (OSError, ValueError) as e:
            why = f"read failed: {e}"
        self.close(why)
        try:
            self._rfile.close()
        except (OSError, ValueError):
            pass

    def _dispatch(self, msg: Dict[str, Any]) -> None:
        rid = msg.get("id")
        if rid is None:
            method = msg.get("method")
            if method and self._on_notify is not None:
                try:
                    self._on_notify(method, msg.get("params"))
                except Exception:  # noqa: BLE001 - a callback bug must not kill the reader
                    pass
            return
        with self._plock:
            fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if fut is None:
            return
        err = msg.get("error")
        if err is not None:
            fut.set_exception(error_from_response(err if isinstance(err, dict) else {"message": str(err)},
                                                  getattr(fut, "method", "")))
        else:
            fut.set_result(msg.get("result"))


def _authenticate(endpoint: str, sock: socket.socket, reader: Any, token: str) -> None:
    """agent.auth as the connection's first line, answered before anything else."""
    req = {"jsonrpc": "2.0", "id": 0, "method": "agent.auth", "params": {"token": token}}
    sock.sendall((_dumps(req) + "\n").encode())
    line = reader.readline(64 << 10)
    if not line:
        raise ConnectionLost(endpoint, "closed while authenticating (agent.auth)", sent=False)
    msg = _loads(line)
    if msg.get("error"):
        raise error_from_response(msg["error"], "agent.auth")


def env_tls() -> TLSOptions:
    """TLS options from FLOWD_CACERT, FLOWD_CLIENT_CERT and FLOWD_CLIENT_KEY."""
    return TLSOptions(os.environ.get("FLOWD_CACERT") or None, os.environ.get("FLOWD_CLIENT_CERT") or None,
                      os.environ.get("FLOWD_CLIENT_KEY") or None)
