#!/usr/bin/env python3
"""Submit examples/workflows/etl.yaml and wait for it (needs the example worker running).

    python3 examples/python/submit_etl.py        # prints the run and load's total (42)

Exit status: 0 when the run succeeded, 3 when it ended otherwise.
"""

from __future__ import annotations

import os
import sys

import flowd

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "..", "workflows", "etl.yaml")


def main() -> int:
    with flowd.Client() as client:
        submitted = client.submit(SPEC, labels={"example": "python"})
        print(f"submitted run {submitted['id']} ({submitted['state']})")
        run = client.wait(submitted["id"], timeout=120)
        tasks = {t["key"]: t for t in run["tasks"]}
        print(f"run {run['id']} {run['state']}: load = {tasks['load'].get('result')}")
        return 0 if run["state"] == "succeeded" else 3


if __name__ == "__main__":
    sys.exit(main())
