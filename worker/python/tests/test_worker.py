"""The worker SDK against a real three-agent cluster: one acceptance point per test."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from typing import Any, Dict, List

import flowd

import cluster


def spec(type_: str, n: int = 1, **task: Any) -> Dict[str, Any]:
    tasks = []
    for i in range(n):
        t: Dict[str, Any] = {"key": f"t{i}", "type": type_}
        t.update(task)
        tasks.append(t)
    return {"name": "py-worker-test", "tasks": tasks}


class WorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = cluster.shared()
        cls.c = cls.cluster.client()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.close()

    def worker(self, **kw: Any) -> flowd.Worker:
        kw.setdefault("claim_wait", 2.0)
        kw.setdefault("drain_timeout", 10.0)
        w = flowd.Worker(self.cluster.addr, id=f"py-{self._testMethodName}", **kw)
        self.addCleanup(w.stop, False)
        return w

    def uniq(self, name: str) -> str:
        return f"{name}-{uuid.uuid4().hex[:6]}"

    def test_submit_and_wait(self) -> None:
        typ = self.uniq("echo")
        w = self.worker()

        @w.task(typ)
        def echo(ctx: flowd.TaskContext) -> Any:
            return {"echo": ctx.input, "run_input": ctx.run_input, "attempt": ctx.attempt}

        w.start()
        run = self.c.run(spec(typ, input={"x": 1}), {"order": 7}, timeout=20)
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(run["tasks"][0]["result"], {"echo": {"x": 1}, "run_input": {"order": 7}, "attempt": 1})

    def test_raising_handler_fails_and_retries_by_policy(self) -> None:
        typ, perm = self.uniq("flaky"), self.uniq("perm")
        w = self.worker()
        calls: List[int] = []

        @w.task(typ)
        def flaky(ctx: flowd.TaskContext) -> Any:
            calls.append(ctx.attempt)
            if ctx.attempt < 3:
                raise ValueError(f"boom on attempt {ctx.attempt}")
            return "third time"

        @w.task(perm)
        def permanent(ctx: flowd.TaskContext) -> Any:
            raise flowd.NonRetryable("bad input, do not retry")

        w.start()
        retry = {"max_attempts": 3, "initial_backoff_ms": 50, "max_backoff_ms": 100}
        run = self.c.run(spec(typ, retry=retry), timeout=20)
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(calls, [1, 2, 3])
        t = self.c.task(run["id"] + "/t0")
        self.assertEqual([a["outcome"] for a in t["attempts"]], ["failed", "failed", "succeeded"])
        self.assertIn("ValueError: boom on attempt 1", t["attempts"][0]["error"])
        run = self.c.run(spec(perm, retry={"max_attempts": 5, "initial_backoff_ms": 50}), timeout=20)
        self.assertEqual(run["state"], "failed")
        t = self.c.task(run["id"] + "/t0")
        self.assertEqual(len(t["attempts"]), 1)
        self.assertIn("NonRetryable: bad input", t["error"])

    def test_handler_timeout_cancels_and_fails_the_attempt(self) -> None:
        typ = self.uniq("slow")
        w = self.worker()
        reasons: List[str] = []

        @w.task(typ, timeout=0.3)
        def slow(ctx: flowd.TaskContext) -> Any:
            if ctx.attempt == 1:
                self.assertTrue(ctx.cancelled.wait(5))
                reasons.append(ctx.cancel_reason)
                return "late"
            return "in time"

        w.start()
        run = self.c.run(spec(typ, retry={"max_attempts": 2, "initial_backoff_ms": 50}), timeout=20)
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(run["tasks"][0]["result"], "in time")
        self.assertEqual(reasons, ["timeout"])
        t = self.c.task(run["id"] + "/t0")
        self.assertEqual([a["outcome"] for a in t["attempts"]], ["failed", "succeeded"])
        self.assertIn("handler timeout", t["attempts"][0]["error"])

    def test_a_result_that_is_not_json_fails_the_task(self) -> None:
        typ = self.uniq("notjson")
        w = self.worker()

        @w.task(typ)
        def bad(ctx: flowd.TaskContext) -> Any:
            return {"when": object()}

        w.start()
        run = self.c.run(spec(typ, retry={"max_attempts": 3, "initial_backoff_ms": 50}), timeout=20)
        self.assertEqual(run["state"], "failed")
        t = self.c.task(run["id"] + "/t0")
        self.assertEqual(len(t["attempts"]), 1)  # not retried
        self.assertIn("result is not JSON", t["error"])

    def test_handler_past_its_lease_keeps_it_by_heartbeats(self) -> None:
        typ = self.uniq("long")
        w = self.worker()

        @w.task(typ)
        def long(ctx: flowd.TaskContext) -> Any:
            self.assertFalse(ctx.cancelled.wait(2.5))  # four leases long
            return "done"

        w.start()
        run = self.c.run(spec(typ, lease_ms=600), timeout=20)
        self.assertEqual(run["state"], "succeeded")
        t = self.c.task(run["id"] + "/t0")
        self.assertEqual([a["outcome"] for a in t["attempts"]], ["succeeded"])
        self.assertEqual(w.stats["lost"], 0)

    def _stall_until_reaped(self, w: flowd.Worker, ctx: flowd.TaskContext) -> None:
        """Stop the worker's heartbeats once the claim is acknowledged, until the agent reaped the lease."""
        cluster.eventually(lambda: ctx._acked, 5, "the claim's acknowledgement")
        w._hold_heartbeats.set()
        cluster.eventually(lambda: any(a.get("outcome") == "lease_expired"
                                       for a in self.c.task(ctx.id)["attempts"]), 10, "the agent's reap")

    def test_lost_lease_cancels_the_handler_and_fencing_rejects_its_completion(self) -> None:
        typ = self.uniq("stall")
        w = self.worker(ack_after=0.1)
        seen: Dict[str, Any] = {}

        @w.task(typ)
        def stall(ctx: flowd.TaskContext) -> Any:
            if ctx.attempt == 1:
                self._stall_until_reaped(w, ctx)
                w._hold_heartbeats.clear()  # the next heartbeat learns the lease is gone
                seen["cancelled"] = ctx.cancelled.wait(5)
                seen["reason"] = ctx.cancel_reason
                seen["token"] = ctx.fencing_token
                first_done.set()
                return "late"
            return "second attempt"

        first_done = threading.Event()
        w.start()
        run = self.c.run(spec(typ, lease_ms=400, retry={"max_attempts": 2, "initial_backoff_ms": 50}), timeout=30)
        self.assertTrue(first_done.wait(10), "the first attempt's handler did not return")
        self.assertTrue(seen["cancelled"], "the handler was not cancelled after its lease was reaped")
        self.assertEqual(seen["reason"], "lease lost")
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(run["tasks"][0]["result"], "second attempt")
        t = self.c.task(run["id"] + "/t0")
        self.assertEqual([a["outcome"] for a in t["attempts"]], ["lease_expired", "succeeded"])
        # The late result is not sent as current ...
        cluster.eventually(lambda: w.stats["discarded"] == 1, 5, "the late result to be discarded")
        # ... and were it sent, the fencing token rejects it:
        late = self.c.call("task.complete", {"task_id": t["id"], "fencing_token": seen["token"], "result": "late"})
        self.assertFalse(late["accepted"])

    def test_late_completion_of_a_reaped_lease_is_rejected(self) -> None:
        typ = self.uniq("stall2")
        w = self.worker(ack_after=0.1)

        @w.task(typ)
        def stall(ctx: flowd.TaskContext) -> Any:
            if ctx.attempt == 1:
                self._stall_until_reaped(w, ctx)
                return "late"  # before any heartbeat could tell it: the completion carries a stale token
            w._hold_heartbeats.clear()
            return "second attempt"

        w.start()
        run = self.c.run(spec(typ, lease_ms=400, retry={"max_attempts": 2, "initial_backoff_ms": 50}), timeout=30)
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(run["tasks"][0]["result"], "second attempt")
        cluster.eventually(lambda: w.stats["rejected"] == 1, 5, "the stale completion's rejection")

    def test_logging_lines_appear_in_flowd_task_logs(self) -> None:
        typ = self.uniq("logs")
        w = self.worker(log_flush=0.2)
        user = logging.getLogger("tests.tasks")
        user.setLevel(logging.INFO)

        @w.task(typ)
        def logs(ctx: flowd.TaskContext) -> Any:
            user.info("processing order %d", 42)
            ctx.log.warning("via ctx.log")
            ctx.print("a printed line")
            time.sleep(0.6)  # a heartbeat carries the first lines
            user.error("last words")
            return None

        w.start()
        run = self.c.run(spec(typ), timeout=20)
        self.assertEqual(run["state"], "succeeded")
        out = self.cluster.cli("task", "logs", run["id"], "t0")
        for line in ("INFO tests.tasks: processing order 42", "WARNING flowd.task." + typ + ": via ctx.log",
                     "a printed line", "ERROR tests.tasks: last words"):
            self.assertIn(line, out)
        self.assertNotIn("flowd.worker", out)

    def test_async_and_sync_handlers_in_one_worker(self) -> None:
        sync_t, async_t, slow_t = self.uniq("sync"), self.uniq("async"), self.uniq("aslow")
        w = self.worker(slots=4)
        threads: Dict[str, set] = {"sync": set(), "async": set()}
        cancelled: List[str] = []

        @w.task(sync_t)
        def s(ctx: flowd.TaskContext) -> Any:
            threads["sync"].add(threading.current_thread().name.split("_")[0])
            time.sleep(0.05)
            return "sync"

        @w.task(async_t)
        async def a(ctx: flowd.TaskContext) -> Any:
            threads["async"].add(threading.current_thread().name)
            await asyncio.sleep(0.05)
            return "async"

        @w.task(slow_t)
        async def slow(ctx: flowd.TaskContext) -> Any:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(ctx.cancel_reason)
                raise
            return "never"

        w.start()
        ids = [self.c.submit(spec(sync_t, 3))["id"], self.c.submit(spec(async_t, 3))["id"]]
        for rid in ids:
            self.assertEqual(self.c.wait(rid, timeout=20)["state"], "succeeded")
        self.assertEqual(threads["async"], {"flowd-asyncio"})
        self.assertEqual(threads["sync"], {"flowd-task"})
        # An async handler past the task's timeout_ms gets CancelledError.
        run = self.c.run(spec(slow_t, timeout_ms=300, retry={"max_attempts": 1}), timeout=20)
        self.assertEqual(run["state"], "failed")
        cluster.eventually(lambda: cancelled == ["timeout"], 5, "CancelledError in the async handler")

    def test_spawn_fans_out(self) -> None:
        split, sq, join = self.uniq("split"), self.uniq("square"), self.uniq("join")
        w = self.worker()

        @w.task(split)
        def do_split(ctx: flowd.TaskContext) -> Any:
            ctx.spawn([{"key": f"sq-{i}", "type": sq, "input": {"n": i}} for i in range(4)])
            return {"children": 4}

        @w.task(sq)
        def do_sq(ctx: flowd.TaskContext) -> Any:
            return ctx.input["n"] ** 2

        @w.task(join)
        def do_join(ctx: flowd.TaskContext) -> Any:
            return sum(v for k, v in ctx.dep_results.items() if k.startswith("sq-"))

        w.start()
        s = {"name": "fan", "tasks": [{"key": "split", "type": split}, {"key": "join", "type": join, "deps": ["split"]}]}
        run = self.c.run(s, timeout=20)
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual({t["key"]: t.get("result") for t in run["tasks"]}["join"], 0 + 1 + 4 + 9)

    def test_sigterm_drains(self) -> None:
        marker = tempfile.NamedTemporaryFile(delete=False)
        marker.close()
        self.addCleanup(os.unlink, marker.name)
        env = dict(os.environ, FLOWD_ADDR=self.cluster.addr, DRAIN_MARKER=marker.name,
                   PYTHONPATH=os.pathsep.join([os.path.dirname(cluster.HERE) + "/src", cluster.HERE]))
        p = subprocess.Popen([sys.executable, "-m", "flowd", "worker", "--module", "drain_tasks", "--slots", "2",
                              "--id", "py-drain"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        first = self.c.submit({"name": "drain", "tasks": [{"key": "t0", "type": "py-drain", "input": {"seconds": 1.5}}]})
        cluster.eventually(lambda: os.path.getsize(marker.name) > 0, 15, "the handler to start")
        lines: List[str] = []
        draining = threading.Event()

        def read() -> None:
            assert p.stdout is not None
            for raw in p.stdout:
                lines.append(raw.decode())
                if "draining" in lines[-1]:
                    draining.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        p.send_signal(signal.SIGTERM)
        self.assertTrue(draining.wait(10), "".join(lines))
        # The agent has seen the half-close once it holds no claim of the worker.
        cluster.eventually(lambda: not any(x["id"] == "py-drain" and x.get("waiting") for x in self.c.workers()),
                           10, "the agent to drop the worker's claim")
        second = self.c.submit({"name": "drain", "tasks": [{"key": "t0", "type": "py-drain", "input": {"seconds": 0}}]})
        p.wait(20)
        reader.join(5)
        assert p.stdout is not None
        p.stdout.close()
        out = "".join(lines)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("drained", out)
        # The running task finished and was reported during the drain ...
        run = self.c.get(first["id"])
        self.assertEqual(run["state"], "succeeded", out)
        # ... and nothing was claimed after the signal.
        self.assertEqual(self.c.get(second["id"])["tasks"][0]["state"], "ready",
                         f"{self.c.task(second['id'] + '/t0')}\n{out}")
        self.c.cancel(second["id"])


if __name__ == "__main__":
    unittest.main()
