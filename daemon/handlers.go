package daemon

import (
	"context"
	"time"

	"github.com/flowd/flowd/rpc"
)

// methods is the agent's method table: the client protocol of
// docs/rpc.md. Reads are served from local state (fenced: after every
// forwarded write this agent answered); writes, long polls and consistent
// reads run on the leader (forwarded when this node follows).
func (a *Agent) methods() map[string]rpc.Handler {
	m := a.methodTable()
	for name, h := range m {
		if relayedMethods[name] {
			h = a.relaying(name, h) // forward_raw.go
			m[name] = h
		}
		if !unfenced[name] {
			m[name] = a.fenced(h)
		}
	}
	return m
}

// unfenced methods read nothing from local state before they run on the
// leader (or only report this node's own status, or move bytes of a
// snapshot file), so they need not wait for the read fence; every other
// method reads or resolves ids locally. Like healthExempt and nodeAddressed
// it is a flag of rpc's method table (rpc.FlagUnfenced).
var unfenced = methodsWith(rpc.FlagUnfenced)

// methodsWith is the set of the methods whose row in rpc's method table
// has flag.
func methodsWith(flag rpc.MethodFlags) map[string]bool {
	out := map[string]bool{}
	for _, m := range rpc.Methods() {
		if m.Flags&flag != 0 {
			out[m.Name] = true
		}
	}
	return out
}

// methodTable is the agent's one handler map: a handler for every row of
// rpc's method table and no other (TestHandlersMatchMethodTable).
func (a *Agent) methodTable() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		rpc.MethodHello:           rpc.Func(a.hello),
		rpc.MethodRunSubmit:       rpc.Func(a.runSubmit),
		rpc.MethodRunGet:          rpc.Func(a.runGet),
		rpc.MethodRunList:         rpc.Func(a.runList),
		rpc.MethodRunWait:         rpc.Func(a.runWait),
		rpc.MethodRunCancel:       rpc.Func(a.verb(rpc.MethodRunCancel)),
		rpc.MethodRunInterrupt:    rpc.Func(a.verb(rpc.MethodRunInterrupt)),
		rpc.MethodRunResume:       rpc.Func(a.verb(rpc.MethodRunResume)),
		rpc.MethodRunRevert:       rpc.Func(a.verb(rpc.MethodRunRevert)),
		rpc.MethodRunReplay:       rpc.Func(a.runReplay),
		rpc.MethodRunRetry:        rpc.Func(a.runRetry),
		rpc.MethodRunStats:        rpc.Func(a.runStats),
		rpc.MethodTaskGet:         rpc.Func(a.taskGet),
		rpc.MethodTaskList:        rpc.Func(a.taskList),
		rpc.MethodTaskClaim:       rpc.Func(a.taskClaim),
		rpc.MethodTaskHeartbeat:   rpc.Func(a.taskHeartbeat),
		rpc.MethodTaskComplete:    rpc.Func(a.taskComplete),
		rpc.MethodTaskFail:        rpc.Func(a.taskFail),
		rpc.MethodClusterStatus:   rpc.Func(a.clusterStatus),
		rpc.MethodClusterStats:    rpc.Func(a.clusterStats),
		rpc.MethodClusterDigest:   rpc.Func(a.clusterDigest),
		rpc.MethodEventsSubscribe: rpc.Func(a.eventsSubscribe),
		rpc.MethodEventsUnsub:     rpc.Func(a.eventsUnsubscribe),
		rpc.MethodEventsList:      rpc.Func(a.eventsList),
		rpc.MethodQueueList:       rpc.Func(a.queueList),
		rpc.MethodQueuePause:      rpc.Func(a.queuePause(true)),
		rpc.MethodQueueResume:     rpc.Func(a.queuePause(false)),
		rpc.MethodQueueSet:        rpc.Func(a.queueSet),
		rpc.MethodQueueDelete:     rpc.Func(a.queueDelete),
		rpc.MethodSettingsGet:     rpc.Func(a.settingsGet),
		rpc.MethodSettingsSet:     rpc.Func(a.settingsSet),
		rpc.MethodWorkersList:     rpc.Func(a.workersList),
		rpc.MethodRaftPeers:       rpc.Func(a.raftPeers),
		rpc.MethodRaftAddPeer:     rpc.Func(a.raftAddPeer),
		rpc.MethodRaftRemovePeer:  rpc.Func(a.raftRemovePeer),
		rpc.MethodRaftTransfer:    rpc.Func(a.raftTransfer),
		rpc.MethodUpgradeStatus:   rpc.Func(a.upgradeStatus),
		rpc.MethodUpgradeFinalize: rpc.Func(a.upgradeFinalize),
		rpc.MethodAutopilotState:  rpc.Func(a.autopilotState),
		rpc.MethodSnapshotSave:    rpc.Func(a.snapshotSave),
		rpc.MethodSnapshotRestore: rpc.Func(a.snapshotRestore),
		rpc.MethodSnapshotRead:    rpc.Func(a.snapshotRead),
		rpc.MethodSnapshotUpload:  rpc.Func(a.snapshotUpload),
		rpc.MethodSnapshotWrite:   rpc.Func(a.snapshotWrite),
		rpc.MethodSnapshotClose:   rpc.Func(a.snapshotClose),
		rpc.MethodTaskSignal:      rpc.Func(a.taskSignal),
		rpc.MethodRunSignal:       rpc.Func(a.runSignal),
		rpc.MethodScheduleCreate:  rpc.Func(a.scheduleCreate),
		rpc.MethodScheduleGet:     rpc.Func(a.scheduleGet),
		rpc.MethodScheduleList:    rpc.Func(a.scheduleList),
		rpc.MethodSchedulePause:   rpc.Func(a.schedulePause(true)),
		rpc.MethodScheduleResume:  rpc.Func(a.schedulePause(false)),
		rpc.MethodScheduleTrigger: rpc.Func(a.scheduleTrigger),
		rpc.MethodScheduleDelete:  rpc.Func(a.scheduleDelete),
		rpc.MethodDefinitionPut:   rpc.Func(a.definitionPut),
		rpc.MethodDefinitionGet:   rpc.Func(a.definitionGet),
		rpc.MethodDefinitionList:  rpc.Func(a.definitionList),
		rpc.MethodACLTokenCreate:  rpc.Func(a.aclTokenCreate),
		rpc.MethodACLTokenList:    rpc.Func(a.aclTokenList),
		rpc.MethodACLTokenDelete:  rpc.Func(a.aclTokenDelete),
		rpc.MethodAuth:            rpc.Func(a.authLate),
		rpc.MethodTaskLogs:        rpc.Func(a.taskLogs),
	}
}

// writeTimeout bounds a write that has no wait of its own (rpc.WriteBudget:
// a method with rpc.FlagWriteBudget gets its context with it already).
const writeTimeout = rpc.WriteBudget

// waitMargin is how long past its own wait a long poll may take.
const waitMargin = 500 * time.Millisecond

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return withDeadline(ctx, time.Now().Add(d))
}

// withDeadline is context.WithDeadline unless ctx already ends sooner:
// then ctx itself (a forwarded call carries its caller's deadline, and the
// server ends every call's context when its handler returns), without a
// timer and a context more per call.
func withDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && !dl.After(d) {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d)
}

func (a *Agent) hello(_ context.Context, p rpc.HelloParams) (rpc.HelloResult, error) {
	leader, _ := a.prop.Leader()
	out := rpc.HelloResult{ProtocolVersion: rpc.ProtocolVersion, NodeID: a.cfg.NodeID, LeaderID: leader, Version: a.cfg.Version}
	if p.ProtocolVersion != 0 && p.ProtocolVersion != rpc.ProtocolVersion {
		return out, invalid("protocol mismatch: this agent speaks version %d, the client %q speaks %d; upgrade the older side",
			rpc.ProtocolVersion, p.Client, p.ProtocolVersion)
	}
	return out, nil
}
