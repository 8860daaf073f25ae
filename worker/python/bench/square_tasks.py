"""The bench's handler, the same work as examples/worker's "square"."""

from __future__ import annotations

from typing import Any, Dict

import flowd


@flowd.task("square")
def square(ctx: flowd.TaskContext) -> Dict[str, Any]:
    n = int((ctx.input or {}).get("n", 0))
    return {"square": n * n}
