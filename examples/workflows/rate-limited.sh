#!/bin/sh
# Rate limits: the emails queue leases at most 5 tasks per second, and its
# smtp tasks at most one every 2 seconds, however many workers claim. The
# backlog of 20 tasks below drains at the limit, not at the workers' speed:
# watch it in `flowd tui` (queues screen: LIMIT, tokens, the lease rate) or
# with `flowd queue list`. Try it with `flowd dev` running (its demo workers
# serve echo).
set -e
# flowd is $FLOWD, else this checkout's bin/flowd (make build, make run),
# else flowd on the PATH; paths below are from the checkout's root.
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${FLOWD:-}" ]; then
  if [ -x "$root/bin/flowd" ]; then FLOWD=$root/bin/flowd; else FLOWD=flowd; fi
fi
cd "$root"
"$FLOWD" queue set emails --create --rate 5                 # the queue: 5/s, burst 1
"$FLOWD" queue set emails --type smtp --rate 0.5    # smtp tasks in it: one every 2 s
tasks=""
for i in $(seq 1 20); do
  tasks="$tasks{\"key\":\"mail$i\",\"type\":\"echo\",\"queue\":\"emails\",\"input\":{\"n\":$i}},"
done
echo "{\"name\":\"newsletter\",\"tasks\":[${tasks%,}]}" > /tmp/newsletter.json
"$FLOWD" submit /tmp/newsletter.json --wait          # about 4 s: 20 tasks at 5/s
"$FLOWD" queue list
"$FLOWD" queue set emails --rate 0                  # remove the queue's limit
