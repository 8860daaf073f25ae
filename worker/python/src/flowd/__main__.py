"""``python -m flowd worker --module mypkg.tasks``: run a worker.

The module registers its handlers with ``@flowd.task("type")`` (or defines
one :class:`flowd.Worker`, whose handlers are then used). Every flag has a
``FLOWD_*`` environment variable.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import List, Optional

from .worker import Worker, default_registry


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    return int(v) if v else default


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flowd", description="flowd Python worker")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="run a worker serving the handlers a module registers")
    w.add_argument("--module", "-m", action="append", default=[], required=not os.environ.get("FLOWD_WORKER_MODULE"),
                   help="module to import (repeatable; env FLOWD_WORKER_MODULE, comma-separated)")
    w.add_argument("--addr", default=os.environ.get("FLOWD_ADDR"), help="agent endpoints (env FLOWD_ADDR)")
    w.add_argument("--id", default=os.environ.get("FLOWD_WORKER_ID"), help="worker id (env FLOWD_WORKER_ID)")
    w.add_argument("--slots", type=int, default=_env_int("FLOWD_WORKER_SLOTS", 4),
                   help="tasks run at once (env FLOWD_WORKER_SLOTS)")
    w.add_argument("--queue", action="append", default=None,
                   help="queue to claim from, repeatable (env FLOWD_WORKER_QUEUES, comma-separated)")
    w.add_argument("--drain-timeout", type=float, default=float(os.environ.get("FLOWD_DRAIN_TIMEOUT", "30")),
                   help="seconds a graceful stop waits for running handlers (env FLOWD_DRAIN_TIMEOUT)")
    w.add_argument("--log-level", default=os.environ.get("FLOWD_LOG_LEVEL", "info"),
                   help="debug, info, warning, error (env FLOWD_LOG_LEVEL)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    modules = args.module or os.environ.get("FLOWD_WORKER_MODULE", "").split(",")
    queues = args.queue or [q for q in os.environ.get("FLOWD_WORKER_QUEUES", "").split(",") if q] or None
    sys.path.insert(0, os.getcwd())
    found: List[Worker] = []
    for name in modules:
        if not name.strip():
            continue
        mod = importlib.import_module(name.strip())
        found.extend(v for v in vars(mod).values() if isinstance(v, Worker))
    registry = default_registry
    if not default_registry.handlers and len(found) == 1:
        registry = found[0]._registry
    worker = Worker(args.addr, id=args.id, slots=args.slots, queues=queues, drain_timeout=args.drain_timeout,
                    registry=registry)
    if not worker.types:
        print("no handlers: the module registers none (use @flowd.task(\"type\"))", file=sys.stderr)
        return 2
    worker.run()
    return 0


def worker_main() -> int:
    """The ``flowd-worker`` script: ``python -m flowd worker`` with the same flags."""
    return main(["worker", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
