"""examples/python: the worker serves etl.yaml, long.yaml and flaky.yaml; submit_etl.py waits for etl."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

import flowd

import cluster

EX = os.path.join(cluster.REPO, "examples", "python")
WF = os.path.join(cluster.REPO, "examples", "workflows")


class ExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = cluster.shared()
        src = os.path.join(os.path.dirname(cluster.HERE), "src")
        cls.env = dict(os.environ, FLOWD_ADDR=cls.cluster.addr,
                       PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
        cls.worker = subprocess.Popen([sys.executable, os.path.join(EX, "worker.py")], env=cls.env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.worker.terminate()
        cls.worker.wait(30)

    def test_submit_etl_script(self) -> None:
        out = subprocess.run([sys.executable, os.path.join(EX, "submit_etl.py")], env=self.env, timeout=60,
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("succeeded: load = {'total': 42, 'parts': 3}", out.stdout)

    def test_long_and_flaky_workflows(self) -> None:
        with self.cluster.client() as c:
            long_spec = flowd.load_spec(os.path.join(WF, "long.yaml"))
            long_spec["tasks"][0]["input"] = {"seconds": 2.5}  # past its 2 s lease
            long_id = c.submit(long_spec)["id"]
            flaky = c.run(os.path.join(WF, "flaky.yaml"), timeout=30)
            self.assertEqual(flaky["state"], "succeeded")
            t = c.task(flaky["id"] + "/call-api")
            self.assertEqual([a["outcome"] for a in t["attempts"]], ["failed", "failed", "succeeded"])
            run = c.wait(long_id, timeout=30)
            self.assertEqual(run["state"], "succeeded")
            self.assertEqual([a["outcome"] for a in c.task(long_id + "/crunch")["attempts"]], ["succeeded"])


if __name__ == "__main__":
    unittest.main()
