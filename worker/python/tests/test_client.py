"""The client against a real three-agent cluster."""

from __future__ import annotations

import os
import unittest
import uuid

import flowd
from flowd import _yaml
from flowd._conn import parse_endpoint

import cluster

REPO = cluster.REPO


def one(type_: str = "echo", **task: object) -> dict:
    t = {"key": "a", "type": type_}
    t.update(task)
    return {"name": "py-test", "tasks": [t]}


class OfflineTest(unittest.TestCase):
    def test_endpoints(self) -> None:
        self.assertEqual(parse_endpoint("unix:///tmp/x.sock"), ("unix", "/tmp/x.sock"))
        self.assertEqual(parse_endpoint("/tmp/x.sock"), ("unix", "/tmp/x.sock"))
        self.assertEqual(parse_endpoint("tls://10.0.0.1:7443"), ("tls", "10.0.0.1:7443"))
        self.assertEqual(parse_endpoint("tcp://h:1"), ("tcp", "h:1"))
        with self.assertRaises(ValueError):
            parse_endpoint("tls://nohost")
        with self.assertRaises(ValueError):
            parse_endpoint("http://x:1")

    def test_yaml_examples_match_the_cli(self) -> None:
        spec = flowd.load_spec(os.path.join(REPO, "examples/workflows/etl.yaml"))
        self.assertEqual([t["key"] for t in spec["tasks"]], ["extract", "transform-a", "transform-b", "transform-c", "load"])
        self.assertEqual(spec["tasks"][0]["input"], {"rows": [1, 2, 3, 4, 5, 6]})
        self.assertEqual(_yaml.loads("a: 'x # y'  # c\nb: [1, 2.5, true, null]\nc: |\n  l1\n  l2\n"),
                         {"a": "x # y", "b": [1, 2.5, True, None], "c": "l1\nl2\n"})

    def test_run_ids_are_uuidv7(self) -> None:
        ids = [flowd.new_run_id() for _ in range(3)]
        self.assertTrue(all(uuid.UUID(i).version == 7 for i in ids))
        self.assertEqual(len(set(ids)), 3)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = cluster.shared()
        cls.c = cls.cluster.client()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.c.close()

    def test_routes_writes_to_the_leader(self) -> None:
        self.c.submit(one("manual-route"))
        leader = self.cluster.leader()
        self.assertEqual(self.c.leader_endpoint, "unix://" + self.cluster.socks[leader])

    def test_submit_is_idempotent_by_client_id(self) -> None:
        rid = flowd.new_run_id()
        first = self.c.submit(one("manual-idem"), client_id=rid, labels={"suite": "py"})
        again = self.c.submit(one("manual-idem"), client_id=rid)
        self.assertEqual(first["id"], rid)
        self.assertTrue(first["created"])
        self.assertEqual(again["id"], rid)
        self.assertFalse(again["created"])
        self.assertEqual(self.c.get(rid)["labels"], {"suite": "py"})
        self.c.cancel(rid)

    def test_errors_are_classes_with_data(self) -> None:
        with self.assertRaises(flowd.NotFound):
            self.c.get(str(uuid.uuid4()))
        with self.assertRaises(flowd.InvalidSpec) as cm:
            self.c.submit({"tasks": [{"key": "a", "type": "x", "deps": ["a", "b"]}]})
        codes = {p["code"] for p in cm.exception.problems}
        self.assertEqual(codes, {"self_dependency", "unknown_dependency"})
        self.assertEqual(cm.exception.code, -32003)
        with self.assertRaises(flowd.MethodNotFound) as m:
            self.c.call("no.such")
        self.assertEqual(m.exception.data, {"method": "no.such"})
        with self.assertRaises(flowd.InvalidParams):
            self.c.call("run.get", {"idx": 1})

    def test_list_pages_as_an_iterator(self) -> None:
        tag = uuid.uuid4().hex[:8]
        ids = {self.c.submit(one("manual-list"), labels={"batch": tag})["id"] for _ in range(5)}
        got = [r["id"] for r in self.c.list(selector=f"batch={tag}", page_size=2)]
        self.assertEqual(set(got), ids)
        self.assertEqual(got, sorted(got, reverse=True))  # newest first
        self.assertEqual(len(list(self.c.list(selector=f"batch={tag}", workflow="py-test", state="running"))), 5)
        for i in ids:
            self.c.cancel(i, reason="done")
        self.assertEqual({r["state"] for r in self.c.list(labels={"batch": tag})}, {"cancelled"})

    def test_verbs_and_wait(self) -> None:
        r = self.c.submit(one("manual-verbs"))
        self.assertTrue(self.c.interrupt(r["id"])["changed"])
        self.assertEqual(self.c.get(r["id"])["state"], "interrupted")
        self.assertTrue(self.c.resume(r["id"])["changed"])
        self.assertFalse(self.c.resume(r["id"])["changed"])  # a lost race is a result
        self.assertTrue(self.c.cancel(r["id"], reason="test")["changed"])
        run = self.c.wait(r["id"], timeout=10)
        self.assertEqual(run["state"], "cancelled")
        with self.assertRaises(flowd.IllegalTransition):
            self.c.resume(r["id"])
        rt = self.c.retry(r["id"])  # in place: the cancelled task is pending again
        self.assertEqual((rt["id"], rt["state"]), (r["id"], "running"))
        self.assertEqual(self.c.get(r["id"])["state"], "running")
        self.c.cancel(r["id"], reason="test")
        self.assertEqual(self.c.wait(r["id"], timeout=10)["state"], "cancelled")
        rp = self.c.replay(r["id"])
        self.assertTrue(rp["created"])
        self.assertEqual(self.c.get(rp["id"])["parent_id"], r["id"])
        self.c.cancel(rp["id"])
        rv = self.c.submit(one("manual-revert"))
        self.assertTrue(self.c.revert(rv["id"], reason="undo")["changed"])
        self.assertEqual(self.c.wait(rv["id"], timeout=10)["state"], "reverted")
        with self.assertRaises(flowd.RunFailed):
            self.c.wait(rv["id"], raise_on_failure=True)
        with self.assertRaises(flowd.Timeout):
            self.c.wait(self.c.submit(one("manual-never"))["id"], timeout=0.5)

    def test_signal_completes_a_wait_task(self) -> None:
        spec = {"name": "approval", "tasks": [{"key": "approve", "type": "wait", "signal": "ok"}]}
        r = self.c.submit(spec)
        cluster.eventually(lambda: self.c.get(r["id"])["tasks"][0].get("waiting"), 10, "a waiting task")
        res = self.c.signal(r["id"], "ok", {"by": "ann"})
        self.assertTrue(res["accepted"])
        run = self.c.wait(r["id"], timeout=10)
        self.assertEqual(run["state"], "succeeded")
        self.assertEqual(run["tasks"][0]["result"], {"by": "ann"})

    def test_definitions_and_schedules(self) -> None:
        name = "pydef-" + uuid.uuid4().hex[:6]
        spec = dict(one("manual-def"), name=name)
        d = self.c.put_definition(spec)
        self.assertEqual(d["version"], 1)
        self.assertFalse(self.c.put_definition(spec, name=name)["created"])
        self.assertEqual(self.c.get_definition(name)["version"], 1)
        self.assertIn(name, [x["name"] for x in self.c.list_definitions()])
        r = self.c.submit(definition=name)
        self.assertEqual(self.c.get(r["id"])["definition"], name)
        self.c.cancel(r["id"])
        sid = "pysched-" + uuid.uuid4().hex[:6]
        s = self.c.create_schedule(sid, one("manual-sched"), interval=3600, paused=True)
        self.assertEqual(s["state"], "paused")
        self.assertIn(sid, [x["id"] for x in self.c.list_schedules()])
        self.assertTrue(self.c.resume_schedule(sid)["changed"])
        t = self.c.trigger_schedule(sid)
        self.assertEqual(t["outcome"], "started")
        self.c.cancel(t["run_id"])
        self.assertTrue(self.c.delete_schedule(sid)["changed"])
        with self.assertRaises(flowd.NotFound):
            self.c.get_schedule(sid)


if __name__ == "__main__":
    unittest.main()
