"""A real three-agent flowd cluster for the tests, started from bin/flowd.

One cluster serves every test module of a run (started on first use,
stopped at exit); a test that kills an agent restarts it before it ends.
FLOWD_BIN names the binary (default: bin/flowd of the repository).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional

import flowd

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BIN = os.environ.get("FLOWD_BIN") or os.path.join(REPO, "bin", "flowd")


def free_ports(n: int) -> List[int]:
    """n distinct free TCP ports (held open together while they are picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def eventually(cond: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> object:
    """Poll cond until it returns something truthy or the deadline passes."""
    end = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while time.monotonic() < end:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001
            last = e
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


class Cluster:
    def __init__(self, n: int = 3, tls: bool = False) -> None:
        if not os.path.exists(BIN):
            raise RuntimeError(f"{BIN} is missing: build it with `go build -o bin/flowd ./cmd/flowd` (or make build)")
        self.dir = tempfile.mkdtemp(prefix="flowd-py-")
        self.ids = [f"n{i}" for i in range(1, n + 1)]
        ports = free_ports(3 * n)
        self.client_addrs = {i: f"127.0.0.1:{ports[2 * n + k]}" for k, i in enumerate(self.ids)}
        self.tls_dir = os.path.join(self.dir, "tls")
        if tls:
            subprocess.run([BIN, "tls", "ca", "create", "--dir", self.tls_dir], check=True, capture_output=True)
            subprocess.run([BIN, "tls", "cert", "create", "--ca-dir", self.tls_dir, "--node", ",".join(self.ids),
                            "--dir", self.tls_dir], check=True, capture_output=True)
        raft = {i: f"127.0.0.1:{ports[k]}" for k, i in enumerate(self.ids)}
        fwd = {i: f"127.0.0.1:{ports[n + k]}" for k, i in enumerate(self.ids)}
        self.peers = ",".join(f"{i}={raft[i]}" for i in self.ids)
        self.args: Dict[str, List[str]] = {}
        self.socks: Dict[str, str] = {}
        for i in self.ids:
            sock = os.path.join(self.dir, f"{i}.sock")
            self.socks[i] = sock
            self.args[i] = [BIN, "agent", "--node-id", i, "--data-dir", os.path.join(self.dir, i),
                            "--raft-addr", raft[i], "--forward-addr", fwd[i],
                            "--socket", sock, "--peers", self.peers,
                            "--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms",
                            "--log-level", "error", "--timer-slack", "0"]
            if tls:
                d = self.tls_dir
                self.args[i] += ["--tls-ca", f"{d}/ca.pem", "--tls-cert", f"{d}/{i}.pem", "--tls-key", f"{d}/{i}-key.pem",
                                 "--client-addr", self.client_addrs[i]]
        self.procs: Dict[str, subprocess.Popen] = {}
        self._lock = threading.Lock()
        for i in self.ids:
            self.start(i)
        self.wait_healthy()

    @property
    def tls_addr(self) -> str:
        return ",".join("tls://" + self.client_addrs[i] for i in self.ids)

    @property
    def addr(self) -> str:
        return ",".join("unix://" + self.socks[i] for i in self.ids)

    def start(self, node: str) -> None:
        with open(os.path.join(self.dir, f"{node}.log"), "ab") as log:
            self.procs[node] = subprocess.Popen(self.args[node], stdout=log, stderr=log, start_new_session=True)

    def kill(self, node: str) -> None:
        p = self.procs[node]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def leader(self) -> str:
        """The leader's node id, as every live agent agrees."""
        def ask() -> Optional[str]:
            seen = set()
            for i in self.ids:
                if self.procs[i].poll() is not None:
                    continue
                with flowd.Client("unix://" + self.socks[i], timeout=2, max_attempts=1) as c:
                    seen.add(c.hello().get("leader_id"))
            return seen.pop() if len(seen) == 1 and "" not in seen else None
        return str(eventually(ask, 20, "one leader"))

    def wait_healthy(self) -> None:
        for i in self.ids:
            def up(i: str = i) -> bool:
                if self.procs[i].poll() is not None:
                    with open(os.path.join(self.dir, f"{i}.log")) as f:
                        raise RuntimeError(f"agent {i} exited: {f.read()[-2000:]}")
                return os.path.exists(self.socks[i])
            eventually(up, 20, f"{i}'s socket")
        self.leader()

    def restart_dead(self) -> None:
        for i in self.ids:
            if self.procs[i].poll() is not None:
                self.start(i)
        self.wait_healthy()

    def client(self, **kw: object) -> flowd.Client:
        return flowd.Client(self.addr, **kw)  # type: ignore[arg-type]

    def cli(self, *args: str, timeout: float = 30) -> str:
        """Run the flowd CLI against the cluster; its stdout."""
        env = dict(os.environ, FLOWD_ADDR=self.addr)
        return subprocess.run([BIN, *args], env=env, check=True, capture_output=True, text=True,
                              timeout=timeout).stdout

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


_shared: Optional[Cluster] = None


def shared() -> Cluster:
    """The cluster every test module of this process uses."""
    global _shared
    if _shared is None:
        _shared = Cluster()
        atexit.register(_shared.stop)
    return _shared
