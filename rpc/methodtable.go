package rpc

import "time"

// The method table: every fact of the protocol about a method, one row per
// method, beside the method names. Where a leader-aware Client sends it
// (route class, docs/rpc.md "Which node serves a call"), who may call it
// (roles) and the flags an agent serves it by are all here; methodRoutes,
// methodRoles, LeaderBound, MethodRoles, AdminOnly and the agent's own
// lists (which handlers wait for the read fence, which an unhealthy node
// answers, which the forwarding port serves) are computed from it. A method
// is added by a constant and a row here, and its handler in the agent (a
// test there checks that handlers and rows agree).

// Method names. They are the contract (the client contract, outside this
// repository, and docs/rpc.md): add, never rename. Each has one row in
// methodTable below.
const (
	MethodHello           = "agent.hello"
	MethodRunSubmit       = "run.submit"
	MethodRunGet          = "run.get"
	MethodRunList         = "run.list"
	MethodRunWait         = "run.wait"
	MethodRunCancel       = "run.cancel"
	MethodRunInterrupt    = "run.interrupt"
	MethodRunResume       = "run.resume"
	MethodRunRevert       = "run.revert"
	MethodRunReplay       = "run.replay"
	MethodRunRetry        = "run.retry"
	MethodRunStats        = "run.stats"
	MethodTaskGet         = "task.get"
	MethodTaskList        = "task.list"
	MethodTaskClaim       = "task.claim"
	MethodTaskHeartbeat   = "task.heartbeat"
	MethodTaskComplete    = "task.complete"
	MethodTaskFail        = "task.fail"
	MethodClusterStatus   = "cluster.status"
	MethodClusterStats    = "cluster.stats"
	MethodClusterDigest   = "cluster.digest"
	MethodEventsSubscribe = "events.subscribe"
	MethodEventsUnsub     = "events.unsubscribe"
	MethodEventsList      = "events.list"
	MethodQueueList       = "queue.list"
	MethodQueuePause      = "queue.pause"
	MethodQueueResume     = "queue.resume"
	MethodQueueSet        = "queue.set"
	MethodQueueDelete     = "queue.delete"
	MethodSettingsGet     = "settings.get"
	MethodSettingsSet     = "settings.set"
	MethodWorkersList     = "workers.list"
	MethodRaftPeers       = "operator.raft.list_peers"
	MethodRaftAddPeer     = "operator.raft.add_peer"
	MethodRaftRemovePeer  = "operator.raft.remove_peer"
	MethodRaftTransfer    = "operator.raft.transfer_leadership"
	// MethodUpgradeStatus and MethodUpgradeFinalize show and raise the
	// cluster's state-machine version (docs/operations.md, "Rolling
	// upgrades").
	MethodUpgradeStatus   = "operator.upgrade.status"
	MethodUpgradeFinalize = "operator.upgrade.finalize"
	// MethodAutopilotState is the leader's autopilot view: each server's
	// health and the cluster's failure tolerance.
	MethodAutopilotState  = "operator.autopilot.state"
	MethodSnapshotSave    = "snapshot.save"
	MethodSnapshotRestore = "snapshot.restore"
	MethodTaskSignal      = "task.signal"
	MethodRunSignal       = "run.signal"

	// ACL tokens (acl.go). agent.auth is answered before the server sees it
	// when it is a TCP connection's first request.
	MethodAuth           = "agent.auth"
	MethodACLTokenCreate = "acl.token.create"
	MethodACLTokenList   = "acl.token.list"
	MethodACLTokenDelete = "acl.token.delete"

	// MethodTaskLogs reads a task's logs (logs.go), optionally waiting for
	// new lines (follow).
	MethodTaskLogs = "task.logs"

	// Schedules (params and results: rpc/schedrpc).
	MethodScheduleCreate  = "schedule.create"
	MethodScheduleGet     = "schedule.get"
	MethodScheduleList    = "schedule.list"
	MethodSchedulePause   = "schedule.pause"
	MethodScheduleResume  = "schedule.resume"
	MethodScheduleTrigger = "schedule.trigger"
	MethodScheduleDelete  = "schedule.delete"

	// Workflow definitions (params and results: rpc/defrpc).
	MethodDefinitionPut  = "definition.put"
	MethodDefinitionGet  = "definition.get"
	MethodDefinitionList = "definition.list"

	// Snapshot transfers (snapshot.go).
	MethodSnapshotRead   = "snapshot.read"
	MethodSnapshotUpload = "snapshot.upload"
	MethodSnapshotWrite  = "snapshot.write"
	MethodSnapshotClose  = "snapshot.close"
)

// routeClass is where a leader-aware Client (ClientOptions.Route "leader")
// sends a method. Every agent accepts every method; the class only saves
// the forwarding hop a follower would otherwise make.
type routeClass uint8

const (
	// routeLocal: about the connected agent itself, or bound to its
	// connection (a subscription's notifications arrive on it). Always the
	// current connection.
	routeLocal routeClass = iota
	// routeRead: a read of the replicated state. With leader routing it
	// goes to the leader (which has applied every acknowledged write), else
	// to the current connection.
	routeRead
	// routeLeader: a write, a long poll or leader memory: it runs on the
	// leader, so it goes straight to the leader's endpoint when the client
	// has it.
	routeLeader
)

// MethodFlags are the facts besides route and roles by which an agent
// serves a method (a bit set).
type MethodFlags uint8

const (
	// FlagConsistent: a read that runs on the leader (after a barrier)
	// when its params say consistent: true, so a follower forwards it then.
	FlagConsistent MethodFlags = 1 << iota
	// FlagNodeAddressed: runs on the agent its params name (node); the
	// connected agent forwards it there.
	FlagNodeAddressed
	// FlagHealthExempt: an unhealthy agent (failed storage, diverged
	// state) still answers it; every other method is -32004 there. These
	// say what is wrong with the node, or take it apart from the cluster.
	FlagHealthExempt
	// FlagUnfenced: does not wait for the agent's read fence (docs/rpc.md,
	// read-your-writes): it reads nothing from the agent's local state
	// before it runs on the leader, reports only the agent's own status, or
	// moves bytes of a snapshot file. Every other method waits for it.
	FlagUnfenced
	// FlagWriteBudget: a write bounded by WriteBudget from the start (its
	// handler sets no wait of its own first). A call the server serves
	// itself starts its context with that deadline, so the handler's
	// budget finds it set and makes no second context and timer (rpc's
	// DESIGN.md).
	FlagWriteBudget
)

// WriteBudget bounds a write that has no wait of its own: past it the
// caller is answered -32004, its outcome unknown (docs/rpc.md, "Timeouts
// and long polls").
const WriteBudget = 10 * time.Second

// MethodSpec is one row of the method table.
type MethodSpec struct {
	// Name is the method's JSON-RPC name (a Method* constant).
	Name  string
	route routeClass
	// Roles may call the method besides admin (who may call everything);
	// RoleNone: admin-only.
	Roles Role
	Flags MethodFlags
}

// LeaderBound reports whether the method always runs on the leader.
func (m MethodSpec) LeaderBound() bool { return m.route == routeLeader }

// Forwarded reports whether an agent ever forwards the method to another
// (the leader, or the agent its params name): the leader-bound methods,
// the consistent reads and the node-addressed ones.
func (m MethodSpec) Forwarded() bool {
	return m.route == routeLeader || m.Flags&(FlagConsistent|FlagNodeAddressed) != 0
}

// methodTable is the one table of methods: name, route class, roles
// besides admin, flags. A row's comment says why its class or flags are
// not the obvious ones.
var methodTable = func() []MethodSpec {
	const (
		local, read, leader = routeLocal, routeRead, routeLeader
		adminOnly, rw       = RoleNone, RoleRead | RoleWorker
		exempt, unfenced    = FlagHealthExempt, FlagUnfenced
		consistent, onNode  = FlagConsistent, FlagNodeAddressed
		budget              = FlagWriteBudget
	)
	return []MethodSpec{
		// The connected agent itself, or its connection.
		{MethodHello, local, rw, exempt | unfenced},
		{MethodAuth, local, rw, 0}, // answered before the server sees it; any role may learn a later one is refused
		{MethodClusterStatus, local, RoleRead, exempt | unfenced},
		{MethodClusterStats, local, RoleRead, 0}, // tasks_per_second is the agent's own meter
		{MethodClusterDigest, local, RoleRead, exempt},
		{MethodRaftPeers, local, RoleRead, exempt},
		{MethodUpgradeStatus, local, RoleRead, exempt}, // the connected agent asks every member
		{MethodEventsSubscribe, local, RoleRead, 0},
		{MethodEventsUnsub, local, RoleRead, 0},
		{MethodSnapshotSave, local, adminOnly, onNode}, // the connected agent writes the file (or the one named)
		{MethodSnapshotRead, local, adminOnly, onNode | unfenced},
		{MethodSnapshotWrite, local, adminOnly, onNode | unfenced},
		{MethodSnapshotClose, local, adminOnly, onNode | unfenced},

		// Reads of the replicated state.
		{MethodRunGet, read, RoleRead, consistent},
		{MethodRunList, read, RoleRead, consistent},
		{MethodRunStats, read, RoleRead, 0},
		{MethodTaskGet, read, RoleRead, 0},
		{MethodTaskList, read, RoleRead, 0},
		{MethodTaskLogs, read, RoleRead, 0},
		{MethodEventsList, read, RoleRead, 0},
		{MethodQueueList, read, RoleRead, 0},
		{MethodSettingsGet, read, RoleRead, 0},
		{MethodScheduleGet, read, RoleRead, 0},
		{MethodScheduleList, read, RoleRead, 0},
		{MethodDefinitionGet, read, RoleRead, 0},
		{MethodDefinitionList, read, RoleRead, 0},
		{MethodACLTokenList, read, adminOnly, 0},

		// Writes, long polls and leader memory.
		{MethodRunSubmit, leader, adminOnly, unfenced | budget},
		{MethodRunReplay, leader, adminOnly, 0},
		{MethodRunRetry, leader, adminOnly, 0},
		{MethodRunCancel, leader, adminOnly, 0},
		{MethodRunInterrupt, leader, adminOnly, 0},
		{MethodRunResume, leader, adminOnly, 0},
		{MethodRunRevert, leader, adminOnly, 0},
		{MethodRunSignal, leader, adminOnly, 0},
		{MethodRunWait, leader, RoleRead, 0},            // long poll
		{MethodTaskClaim, leader, RoleWorker, unfenced}, // long poll
		{MethodTaskHeartbeat, leader, RoleWorker, unfenced | budget},
		{MethodTaskComplete, leader, RoleWorker, unfenced | budget},
		{MethodTaskFail, leader, RoleWorker, unfenced | budget},
		{MethodTaskSignal, leader, adminOnly, 0},
		{MethodQueuePause, leader, adminOnly, 0},
		{MethodQueueResume, leader, adminOnly, 0},
		{MethodQueueSet, leader, adminOnly, 0},
		{MethodQueueDelete, leader, adminOnly, 0},
		{MethodSettingsSet, leader, adminOnly, 0},
		{MethodWorkersList, leader, RoleRead, 0}, // the list lives in the leader's memory
		{MethodScheduleCreate, leader, adminOnly, 0},
		{MethodSchedulePause, leader, adminOnly, 0},
		{MethodScheduleResume, leader, adminOnly, 0},
		{MethodScheduleTrigger, leader, adminOnly, 0},
		{MethodScheduleDelete, leader, adminOnly, 0},
		{MethodDefinitionPut, leader, adminOnly, 0},
		{MethodACLTokenCreate, leader, adminOnly, 0},
		{MethodACLTokenDelete, leader, adminOnly, 0},
		{MethodRaftAddPeer, leader, adminOnly, 0},
		{MethodRaftRemovePeer, leader, adminOnly, exempt},
		{MethodRaftTransfer, leader, adminOnly, exempt},
		{MethodUpgradeFinalize, leader, adminOnly, 0},
		{MethodAutopilotState, leader, RoleRead, exempt},    // autopilot runs on the leader
		{MethodSnapshotRestore, leader, adminOnly, 0},       // the file is read on the leader's machine
		{MethodSnapshotUpload, leader, adminOnly, unfenced}, // the leader stages the upload
	}
}()

// Lookups computed from methodTable.
var (
	methodByName = index(methodTable, func(m MethodSpec) MethodSpec { return m })
	methodRoutes = index(methodTable, func(m MethodSpec) routeClass { return m.route })
	methodRoles  = index(methodTable, func(m MethodSpec) Role { return m.Roles })
)

func index[V any](table []MethodSpec, f func(MethodSpec) V) map[string]V {
	out := make(map[string]V, len(table))
	for _, m := range table {
		out[m.Name] = f(m)
	}
	return out
}

// Methods returns the method table, one row per method.
func Methods() []MethodSpec { return append([]MethodSpec(nil), methodTable...) }

// LookupMethod returns method's row; ok is false for a method the protocol
// does not have.
func LookupMethod(method string) (spec MethodSpec, ok bool) {
	spec, ok = methodByName[method]
	return spec, ok
}
