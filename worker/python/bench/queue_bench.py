"""Queue workload for the Python worker beside the Go SDK's.

One-task runs of type "square" (200 bytes of input) are submitted by P
producer threads (one client each) while ONE worker process with W slots
(the SDK's defaults otherwise) claims and completes them: the Python SDK
(`python -m flowd worker`) or the Go SDK (examples/worker, built with
`go build -o /tmp/flowd-exworker ./examples/worker`). A fresh three-agent
cluster is started for each measurement. Reported: jobs/s (first submit to
the last task done) and the worker process's CPU per job (utime+stime from
/proc over the same window), with the agents' CPU per job beside it.

    python3 worker/python/bench/queue_bench.py --sdk python --workers 16
    python3 worker/python/bench/queue_bench.py --sdk go --workers 64 --jobs 3000

--presubmit submits every job first (queue paused) and times the drain
only: the worker's own ceiling without the producers' load on the box.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import flowd  # noqa: E402
import cluster  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sdk", choices=["python", "go"], default="python")
    ap.add_argument("--workers", type=int, default=16, help="W: the worker's slots")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--payload", type=int, default=200)
    ap.add_argument("--presubmit", action="store_true")
    ap.add_argument("--go-worker", default="/tmp/flowd-exworker")
    args = ap.parse_args()

    cl = cluster.Cluster()
    try:
        return run(cl, args)
    finally:
        cl.stop()


def run(cl: "cluster.Cluster", args: Any) -> int:
    queue = "benchq"
    c = cl.client()
    if args.presubmit:
        c.call("queue.pause", {"name": queue}, mode="all")
    env = dict(os.environ, FLOWD_ADDR=cl.addr, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "src"), HERE]))
    if args.sdk == "python":
        cmd = [sys.executable, "-m", "flowd", "worker", "--module", "square_tasks", "--slots", str(args.workers),
               "--id", "bench-py", "--log-level", "warning"]
    else:
        cmd = [args.go_worker, "-concurrency", str(args.workers), "-id", "bench-go"]
    wp = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cluster.eventually(lambda: any(w.get("waiting") for w in c.workers()), 20, "the worker's first claim")
        pad = "x" * max(0, args.payload - 20)
        spec: Dict[str, Any] = {"name": "bench", "tasks": [{"key": "t", "type": "square", "queue": queue}]}
        per = [args.jobs // args.producers + (1 if i < args.jobs % args.producers else 0) for i in range(args.producers)]
        st0 = c.cluster_stats()
        done0, ok0 = int(st0["tasks_done"]), int(st0["runs"]["succeeded"])
        agents = [p.pid for p in cl.procs.values()]

        def produce(n: int, base: int) -> None:
            with cl.client() as pc:
                for i in range(n):
                    s = dict(spec, tasks=[dict(spec["tasks"][0], input={"n": base + i, "pad": pad})])
                    pc.submit(s)

        threads = [threading.Thread(target=produce, args=(n, sum(per[:i]))) for i, n in enumerate(per)]
        if args.presubmit:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        wcpu0, acpu0, t0 = cpu_seconds(wp.pid), sum(cpu_seconds(p) for p in agents), time.monotonic()
        if args.presubmit:
            c.call("queue.resume", {"name": queue}, mode="all")
        else:
            for t in threads:
                t.start()
        while int(c.cluster_stats()["tasks_done"]) - done0 < args.jobs:
            if time.monotonic() - t0 > 300:
                raise SystemExit("stalled")
            time.sleep(0.02)
        t1 = time.monotonic()
        wcpu1, acpu1 = cpu_seconds(wp.pid), sum(cpu_seconds(p) for p in agents)
        for t in threads:
            t.join()
        succeeded = cluster.eventually(lambda: int(c.cluster_stats()["runs"]["succeeded"]) - ok0 >= args.jobs
                                       and int(c.cluster_stats()["runs"]["succeeded"]) - ok0, 30, "every run succeeded")
    finally:
        wp.terminate()
        wp.wait(30)
        c.close()
    secs = t1 - t0
    rep: Dict[str, Any] = {"sdk": args.sdk, "workers": args.workers, "jobs": args.jobs, "producers": args.producers,
                           "presubmit": args.presubmit, "succeeded": succeeded, "seconds": round(secs, 2),
                           "jobs_per_second": round(args.jobs / secs, 1),
                           "worker_cpu_ms_per_job": round((wcpu1 - wcpu0) * 1000 / args.jobs, 3),
                           "worker_cpu_cores": round((wcpu1 - wcpu0) / secs, 2),
                           "agents_cpu_ms_per_job": round((acpu1 - acpu0) * 1000 / args.jobs, 3)}
    print(json.dumps(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
