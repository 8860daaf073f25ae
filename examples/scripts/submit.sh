#!/usr/bin/env bash
# Submit a workflow and wait for it over the raw protocol: newline-delimited
# JSON-RPC 2.0 on the agent's Unix socket, with socat and jq only.
#
#   examples/scripts/submit.sh /tmp/flowd-dev/n1.sock examples/workflows/hello.json
#
# Exit status: 0 succeeded, 3 failed/cancelled/reverted, 4 timed out, 1 error.
# Needs socat and jq (Debian/Ubuntu: apt-get install socat jq; macOS: brew
# install socat jq). submit.py next to it needs only Python 3.
set -euo pipefail
missing=()
for tool in socat jq; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  echo "submit.sh needs ${missing[*]}: install ${missing[*]} (Debian/Ubuntu: sudo apt-get install ${missing[*]}; macOS: brew install ${missing[*]}), or use examples/scripts/submit.py (Python 3 only)" >&2
  exit 1
fi
sock=${1:?usage: submit.sh SOCKET WORKFLOW.json [TIMEOUT_MS]}
wf=${2:?usage: submit.sh SOCKET WORKFLOW.json [TIMEOUT_MS]}
timeout_ms=${3:-30000}

call() { # one request per connection; -t keeps socat reading until the reply
  local t=$(( $2 / 1000 + 5 ))
  printf '%s\n' "$1" | socat -t "$t" - "UNIX-CONNECT:$sock"
}

# jq -c: the framing is one JSON value per line, so requests must be compact.
req=$(jq -c -n --slurpfile wf "$wf" '{jsonrpc:"2.0", id:1, method:"run.submit", params:{workflow:$wf[0]}}')
resp=$(call "$req" 0)
if jq -e '.error' >/dev/null <<<"$resp"; then
  echo "submit failed: $(jq -c '.error' <<<"$resp")" >&2
  exit 1
fi
id=$(jq -r '.result.id' <<<"$resp")
echo "submitted $id"

req=$(jq -c -n --arg id "$id" --argjson t "$timeout_ms" '{jsonrpc:"2.0", id:2, method:"run.wait", params:{id:$id, timeout_ms:$t}}')
resp=$(call "$req" "$timeout_ms")
if jq -e '.error' >/dev/null <<<"$resp"; then
  echo "wait failed: $(jq -c '.error' <<<"$resp")" >&2
  exit 1
fi
state=$(jq -r '.result.run.state' <<<"$resp")
echo "$id $state"
case "$(jq -r '.result.done' <<<"$resp"):$state" in
  true:succeeded) exit 0 ;;
  true:*) exit 3 ;;
  *) exit 4 ;;
esac
