#!/usr/bin/env python3
"""Submit a workflow and wait for it over the raw flowd protocol.

Newline-delimited JSON-RPC 2.0 on an agent's Unix socket (or tcp://host:port),
Python standard library only.

    examples/scripts/submit.py /tmp/flowd-dev/n1.sock examples/workflows/hello.json

Exit status: 0 succeeded, 3 failed/cancelled/reverted, 4 timed out, 1 error.
"""
import itertools
import json
import socket
import sys


class Client:
    def __init__(self, endpoint):
        if endpoint.startswith("tcp://"):
            host, port = endpoint[len("tcp://"):].rsplit(":", 1)
            self.sock = socket.create_connection((host, int(port)))
        else:
            path = endpoint[len("unix://"):] if endpoint.startswith("unix://") else endpoint
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)
        self.file = self.sock.makefile("rwb")
        self.ids = itertools.count(1)

    def call(self, method, params):
        req_id = next(self.ids)
        # Compact JSON on one line: the framing is one value per line.
        line = json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params},
                          separators=(",", ":"))
        self.file.write(line.encode() + b"\n")
        self.file.flush()
        while True:
            msg = json.loads(self.file.readline())
            if msg.get("id") != req_id:  # a notification, or another reply
                continue
            if "error" in msg:
                err = msg["error"]
                raise RuntimeError(f"{method}: {err['message']} (code {err['code']}) {json.dumps(err.get('data'))}")
            return msg["result"]


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 1
    endpoint, path = argv[1], argv[2]
    timeout_ms = int(argv[3]) if len(argv) > 3 else 30000
    with open(path) as f:
        workflow = json.load(f)
    c = Client(endpoint)
    try:
        sub = c.call("run.submit", {"workflow": workflow})
        print("submitted", sub["id"])
        res = c.call("run.wait", {"id": sub["id"], "timeout_ms": timeout_ms})
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    state = res["run"]["state"]
    print(sub["id"], state)
    if not res["done"]:
        return 4
    return 0 if state == "succeeded" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
