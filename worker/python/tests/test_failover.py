"""Failover: kill -9 of agents while a worker and an event stream use them."""

from __future__ import annotations

import collections
import threading
import time
import unittest
import uuid
from typing import Any, Dict, List

import flowd

import cluster


class FailoverTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = cluster.shared()

    def tearDown(self) -> None:
        self.cluster.restart_dead()

    def test_kill_leader_during_50_tasks_loses_nothing_and_completes_each_once(self) -> None:
        typ = "py-fail-" + uuid.uuid4().hex[:6]
        w = flowd.Worker(self.cluster.addr, id="py-failover", slots=4, claim_wait=2.0)
        self.addCleanup(w.stop, False)
        runs_of: Dict[str, int] = collections.Counter()
        lock = threading.Lock()

        @w.task(typ)
        def work(ctx: flowd.TaskContext) -> Any:
            with lock:
                runs_of[ctx.id] += 1
            time.sleep(0.1)
            return {"n": ctx.input["n"]}

        w.start()
        with self.cluster.client() as c:
            spec = {"name": "failover", "tasks": [
                {"key": f"t{n:02d}", "type": typ, "input": {"n": n}, "lease_ms": 3000,
                 "retry": {"max_attempts": 5, "initial_backoff_ms": 50}} for n in range(50)]}
            rid = c.submit(spec)["id"]
            cluster.eventually(lambda: w.stats["completed"] >= 10, 30, "ten completions")
            leader = self.cluster.leader()
            self.cluster.kill(leader)
            self.assertLess(w.stats["completed"], 45, "the run ended before the leader was killed")
            run = c.wait(rid, timeout=60)
            self.assertEqual(run["state"], "succeeded")
            self.assertEqual(len(run["tasks"]), 50)
            new_leader = self.cluster.leader()
            self.assertNotEqual(new_leader, leader)
            c.get(rid)  # a read of the replicated state goes to the leader: re-routed
            self.assertEqual(c.leader_endpoint, "unix://" + self.cluster.socks[new_leader])
            self.assertEqual(w.client.leader_endpoint, "unix://" + self.cluster.socks[new_leader])
            for t in run["tasks"]:
                self.assertEqual(t["result"], {"n": int(t["key"][1:])})
                attempts = c.task(t["id"])["attempts"]
                ok = [a for a in attempts if a["outcome"] == "succeeded"]
                self.assertEqual(len(ok), 1, attempts)  # completed once
        self.assertEqual(len(runs_of), 50)

    def test_events_resume_after_the_connected_agent_is_killed(self) -> None:
        leader = self.cluster.leader()
        follower = next(i for i in self.cluster.ids if i != leader)
        order = [follower] + [i for i in self.cluster.ids if i != follower]
        addr = ",".join("unix://" + self.cluster.socks[i] for i in order)
        with flowd.Client(addr) as c:
            start = int(c.cluster_status()["applied_index"])
            got: List[Dict[str, Any]] = []
            cv = threading.Condition()

            def consume() -> None:
                for ev in c.events(from_index=start, idle_timeout=5):
                    with cv:
                        got.append(ev)
                        cv.notify_all()

            th = threading.Thread(target=consume, daemon=True)
            th.start()

            def seen(run_id: str) -> bool:
                with cv:
                    return any(e.get("run_id") == run_id and e.get("transition") == "cancel" for e in got)

            def churn() -> str:
                r = c.submit({"name": "events", "tasks": [{"key": "a", "type": "py-events-none"}]})
                c.cancel(r["id"])
                return str(r["id"])

            before = churn()
            cluster.eventually(lambda: seen(before), 10, "events from the first agent")
            self.cluster.kill(follower)  # the agent the stream is connected to
            after = churn()
            cluster.eventually(lambda: seen(after), 20, "events after the reconnect")
            with cv:
                keys = [(e["index"], e["seq"]) for e in got]
            self.assertEqual(keys, sorted(set(keys)), "events repeated or out of order")
            # Nothing lost: every retained event in the range, as a live agent lists it.
            listed = c.call("events.list", {"from_index": start, "limit": 10000}, mode="all")["events"]
            want = [(e["index"], e["seq"]) for e in listed if (e["index"], e["seq"]) <= keys[-1]]
            self.assertEqual(keys, want)


if __name__ == "__main__":
    unittest.main()
