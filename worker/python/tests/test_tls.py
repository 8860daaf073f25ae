"""tls:// endpoints with the cluster CA and ACL tokens (agent.auth), as the CLI takes them."""

from __future__ import annotations

import os
import unittest
from typing import Any

import flowd

import cluster


class TLSTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = cluster.Cluster(tls=True)
        cls.ca = os.path.join(cls.cluster.tls_dir, "ca.pem")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.stop()

    def token(self, role: str) -> str:
        with self.cluster.client() as c:  # the Unix socket: the kernel names the caller
            tok = c.call("acl.token.create", {"role": role, "name": "py-" + role})
        for i in self.cluster.ids:  # every agent has applied it (a follower answers agent.auth itself)
            with flowd.Client("unix://" + self.cluster.socks[i]) as c:
                cluster.eventually(lambda: tok["id"] in [t["id"] for t in c.call("acl.token.list", {})["tokens"]],
                                   10, f"{i} to know the token")
        return str(tok["secret"])

    def test_worker_token_over_tls(self) -> None:
        admin, worker_token = self.token("admin"), self.token("worker")
        typ = "py-tls"
        w = flowd.Worker(self.cluster.tls_addr, token=worker_token, ca_cert=self.ca, claim_wait=2.0)
        self.addCleanup(w.stop, False)

        @w.task(typ)
        def echo(ctx: flowd.TaskContext) -> Any:
            return ctx.input

        w.start()
        with flowd.Client(self.cluster.tls_addr, token=admin, ca_cert=self.ca) as c:
            run = c.run({"name": "tls", "tasks": [{"key": "a", "type": typ, "input": {"over": "tls"}}]}, timeout=20)
            self.assertEqual(run["state"], "succeeded")
            self.assertEqual(run["tasks"][0]["result"], {"over": "tls"})
            self.assertTrue(c.leader_endpoint and c.leader_endpoint.startswith("tls://"))
        with flowd.Client(self.cluster.tls_addr, token=worker_token, ca_cert=self.ca, max_attempts=1) as c:
            with self.assertRaises(flowd.PermissionDenied) as cm:
                c.submit({"tasks": [{"key": "a", "type": typ}]})
            self.assertEqual(cm.exception.data.get("role"), "worker")

    def test_env_and_refusals(self) -> None:
        old = {k: os.environ.get(k) for k in ("FLOWD_ADDR", "FLOWD_TOKEN", "FLOWD_CACERT")}
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                                 for k, v in old.items()])
        os.environ.update(FLOWD_ADDR=self.cluster.tls_addr, FLOWD_TOKEN=self.token("read"), FLOWD_CACERT=self.ca)
        with flowd.Client() as c:
            self.assertIn(c.cluster_status()["state"], ("leader", "follower"))
        with flowd.Client(token="flowd_not-a-token", max_attempts=1) as c:
            with self.assertRaises(flowd.PermissionDenied):
                c.cluster_status()
        w = flowd.Worker(token="flowd_not-a-token")
        w.register("x", lambda ctx: None)
        w.start()
        cluster.eventually(lambda: isinstance(w.error, flowd.PermissionDenied), 10, "the worker to report the refusal")
        other = os.path.join(self.cluster.dir, "other-ca")
        cluster.subprocess.run([cluster.BIN, "tls", "ca", "create", "--dir", other], check=True, capture_output=True)
        with flowd.Client(ca_cert=os.path.join(other, "ca.pem"), max_attempts=1) as c:
            with self.assertRaises(flowd.ConnectionLost) as cm:
                c.cluster_status()
            self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
