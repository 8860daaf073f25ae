"""Where a leader-aware client sends each method (rpc/methodtable.go)."""

from __future__ import annotations

LOCAL, READ, LEADER = 0, 1, 2

_READ = {
    "run.get", "run.list", "run.stats", "task.get", "task.logs", "events.list", "queue.list", "settings.get",
    "schedule.get", "schedule.list", "definition.get", "definition.list", "acl.token.list",
}
_LEADER = {
    "run.submit", "run.replay", "run.cancel", "run.interrupt", "run.resume", "run.revert", "run.signal",
    "run.wait", "task.claim", "task.heartbeat", "task.complete", "task.fail", "task.signal", "queue.pause",
    "queue.resume", "queue.set", "queue.delete", "settings.set", "workers.list", "schedule.create",
    "schedule.pause", "schedule.resume", "schedule.trigger", "schedule.delete", "definition.put",
    "acl.token.create", "acl.token.delete", "operator.raft.add_peer", "operator.raft.remove_peer",
    "operator.raft.transfer_leadership", "operator.upgrade.finalize", "operator.autopilot.state",
    "snapshot.restore", "snapshot.upload",
}


def route_of(method: str) -> int:
    """LOCAL (the connected agent), READ (replicated state) or LEADER."""
    if method in _LEADER:
        return LEADER
    if method in _READ:
        return READ
    return LOCAL
