#!/bin/sh
# Adaptive concurrency: the thumbs queue lets the leader choose its cap
# between 1 and 16, aiming at a claim-to-completion latency under 250 ms.
# It starts at 16; when the tasks slow down (a downstream that struggles
# under load) the cap halves, and it climbs back by one a second once
# latency is under the target again. Watch the cap move in `flowd tui`
# (queues screen: CAP 16~, the detail line's sparkline of caps) or with
# `flowd queue list` and `flowd events`. Try it with `flowd dev` running
# (its demo workers serve echo and sleep).
set -e
# flowd is $FLOWD, else this checkout's bin/flowd (make build, make run),
# else flowd on the PATH; paths below are from the checkout's root.
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${FLOWD:-}" ]; then
  if [ -x "$root/bin/flowd" ]; then FLOWD=$root/bin/flowd; else FLOWD=flowd; fi
fi
cd "$root"
"$FLOWD" queue set thumbs --create --concurrency auto --min 1 --max 16 --target-latency 250ms
tasks=""
for i in $(seq 1 200); do
  # every tenth task takes 800 ms: enough slow ones to push the p90 up
  ms=20; [ $((i % 10)) -eq 0 ] && ms=800
  tasks="$tasks{\"key\":\"thumb$i\",\"type\":\"sleep\",\"queue\":\"thumbs\",\"input\":{\"ms\":$ms}},"
done
echo "{\"name\":\"thumbnails\",\"tasks\":[${tasks%,}]}" > /tmp/thumbnails.json
"$FLOWD" submit /tmp/thumbnails.json --wait
"$FLOWD" queue list                                  # CONCURRENCY: auto N (1-16 <250ms)
"$FLOWD" queue set thumbs --concurrency 0            # back to a fixed cap (unlimited)
