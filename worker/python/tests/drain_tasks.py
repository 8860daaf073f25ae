"""Handlers for the SIGTERM drain test (run by `python -m flowd worker --module drain_tasks`)."""

from __future__ import annotations

import os
import time

import flowd


@flowd.task("py-drain")
def slow(ctx: flowd.TaskContext) -> dict:
    marker = os.environ.get("DRAIN_MARKER")
    if marker:
        with open(marker, "a") as f:
            f.write(ctx.id + "\n")
    time.sleep(float(ctx.input.get("seconds", 1.5)))
    return {"slept": ctx.input.get("seconds", 1.5), "pid": os.getpid()}
