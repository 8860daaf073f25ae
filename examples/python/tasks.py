"""The example Python worker's handlers (docs/python.md).

Run it:   python3 -m flowd worker --module tasks        (from examples/python)
or:       python3 examples/python/worker.py

It serves examples/workflows/etl.yaml (extract, transform, load),
long.yaml (a long task that keeps its 2 s lease by heartbeats) and
flaky.yaml (fails twice, then succeeds on its retry), the same types as the
Go example worker (examples/worker).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Dict

import flowd

log = logging.getLogger("examples.tasks")


# ETL: extract -> transform x3 -> load, results flowing via dep_results.
@flowd.task("extract")
def extract(ctx: flowd.TaskContext) -> Dict[str, Any]:
    rows = (ctx.input or {}).get("rows")
    if not isinstance(rows, list):
        raise flowd.NonRetryable("extract needs input {rows: [...]}")
    log.info("extracted %d rows", len(rows))
    return {"rows": rows}


@flowd.task("transform")
def transform(ctx: flowd.TaskContext) -> Dict[str, Any]:
    part, of = ctx.input.get("part"), ctx.input.get("of")
    if not of:
        raise flowd.NonRetryable("transform needs input {part, of}")
    rows = ctx.dep_results["extract"]["rows"]
    total = sum(v * 2 for i, v in enumerate(rows) if i % of == part)
    ctx.log.info("part %d of %d: sum %d", part, of, total)
    return {"sum": total}


@flowd.task("load")
def load(ctx: flowd.TaskContext) -> Dict[str, Any]:
    total = sum(r["sum"] for r in ctx.dep_results.values())
    return {"total": total, "parts": len(ctx.dep_results)}


# A long task: it runs for input.seconds on a lease of 2 s; the worker keeps
# the lease by heartbeats (every lease/3). An async handler: it runs on the
# worker's event loop, and a lost lease or a timeout cancels it
# (asyncio.CancelledError).
@flowd.task("long")
async def long(ctx: flowd.TaskContext) -> Dict[str, Any]:
    seconds = float((ctx.input or {}).get("seconds", 5))
    step = 0.5
    worked = 0.0
    while worked < seconds:
        await asyncio.sleep(step)
        worked += step
        ctx.log.info("worked %.1f of %.1f s", worked, seconds)
    return {"worked_seconds": seconds}


# A flaky upstream: attempts up to input.fail_first raise (retryable, so
# the task's retry policy retries them), the next one succeeds.
@flowd.task("flaky-api")
def flaky_api(ctx: flowd.TaskContext) -> Dict[str, Any]:
    fail_first = int((ctx.input or {}).get("fail_first", 0))
    if ctx.attempt <= fail_first:
        raise flowd.Retryable(f"upstream returned 503 on attempt {ctx.attempt}")
    return {"status": 200, "attempt": ctx.attempt}


@flowd.task("report")
def report(ctx: flowd.TaskContext) -> Dict[str, Any]:
    return {"inputs": len(ctx.dep_results)}
