#!/usr/bin/env python3
"""The example Python worker: serves the handlers of tasks.py.

    pip install --no-index --no-build-isolation ./worker/python
    python3 examples/python/worker.py            # FLOWD_ADDR, or the flowd dev sockets

SIGTERM or Ctrl-C drains (running tasks finish and are reported); a second
one stops at once.
"""

from __future__ import annotations

import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import flowd  # noqa: E402
import tasks  # noqa: E402,F401  (registers the handlers with @flowd.task)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = flowd.Worker(slots=int(os.environ.get("FLOWD_WORKER_SLOTS", "8")))
    worker.run()


if __name__ == "__main__":
    main()
