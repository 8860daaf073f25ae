#!/bin/sh
# A workflow definition: store examples/workflows/etl.yaml as a named,
# versioned definition (its name is the workflow's: etl), run the latest
# version by name, change the spec and store version 2, and pin a run to
# version 1. A version never changes: `flowd def put --version 1` with
# another spec is refused. Try it with `flowd dev` running.
set -e
# flowd is $FLOWD, else this checkout's bin/flowd (make build, make run),
# else flowd on the PATH; paths below are from the checkout's root.
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${FLOWD:-}" ]; then
  if [ -x "$root/bin/flowd" ]; then FLOWD=$root/bin/flowd; else FLOWD=flowd; fi
fi
cd "$root"
"$FLOWD" def put examples/workflows/etl.yaml --note 'first cut'      # etl@1
"$FLOWD" submit --definition etl --wait                              # runs etl@1
sed 's/rows: \[1, 2, 3, 4, 5, 6\]/rows: [2, 4, 6, 8, 10, 12]/' examples/workflows/etl.yaml > /tmp/etl-v2.yaml
"$FLOWD" def put /tmp/etl-v2.yaml --note 'doubled rows'              # etl@2 (load total 84)
"$FLOWD" submit --definition etl --wait                              # runs etl@2 (the latest)
"$FLOWD" submit --definition etl@1 --wait                            # runs etl@1
"$FLOWD" def list
"$FLOWD" def get etl --versions
"$FLOWD" run list --definition etl@2
