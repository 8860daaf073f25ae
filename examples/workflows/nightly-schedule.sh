#!/bin/sh
# A schedule: run examples/workflows/etl.yaml every night at 02:30 Berlin
# time, never two at once (a fire while the last run still runs waits for
# it: buffer_one), and after an outage catch up on fires at most 10 minutes
# late. Then show its next fire times and fire it once now.
set -e
# flowd is $FLOWD, else this checkout's bin/flowd (make build, make run),
# else flowd on the PATH; paths below are from the checkout's root.
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${FLOWD:-}" ]; then
  if [ -x "$root/bin/flowd" ]; then FLOWD=$root/bin/flowd; else FLOWD=flowd; fi
fi
cd "$root"
"$FLOWD" schedule create nightly-etl examples/workflows/etl.yaml \
  --cron '30 2 * * *' --tz Europe/Berlin --overlap buffer_one \
  --catchup-window 10m --label team=data --note 'nightly load'
"$FLOWD" schedule get nightly-etl
"$FLOWD" schedule trigger nightly-etl
"$FLOWD" run list --label flowd.schedule=nightly-etl
# Every second, for trying it out with `flowd dev`:
#   flowd schedule create tick examples/workflows/hello.json --every 1s --overlap allow
#   flowd events | grep schedule
