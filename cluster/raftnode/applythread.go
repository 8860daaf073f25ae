package raftnode

import (
	"log/slog"
	"runtime"
)

// DefaultFollowerApplyNice is how much a follower's apply thread's nice
// value is raised above the agent's (cluster.Config.FollowerApplyNice).
const DefaultFollowerApplyNice = 10

// applyThread runs a follower's applies at a lower scheduling priority
// (on Linux a nice value is per thread), so that where agents share cores
// with each other or with their clients, the commit path (the followers'
// appends and acknowledgements, the leader's own apply and its callers)
// gets a core first and a follower applies in the time left over. A
// follower's apply is off the commit path: raft commits an entry once a
// majority stored it, and callers are answered from the leader's apply.
// The weight of nice 10 is about a tenth of nice 0's, so a lowered apply
// still advances under full load (CFS never starves a runnable thread),
// only later.
//
// Raft's FSM goroutine is locked to its thread, whose nice value is
// raised while the node follows and set back when it leads: the leader's
// apply is on every caller's path (unlocking it while it leads measured
// worse). A nice value can be raised without privileges but lowered again
// only with them (root, CAP_SYS_NICE, or RLIMIT_NICE: systemd's
// LimitNICE=), so without them a follower applies at the agent's
// priority. Handing a follower's applies to a goroutine
// locked to a lowered thread of its own instead (one that ends when the
// node leads) was measured and not kept: its two thread switches per
// applied batch cost more CPU than the priority won back
// (docs/performance.md, "A follower's apply at a lower priority").
//
// set is called only from raft's FSM goroutine (Apply, Snapshot and
// Restore are never concurrent), before each batch: the first lowering
// locks that goroutine to its thread for good, and a batch that changes
// nothing costs no system call.
type applyThread struct {
	nice int // added to the agent's nice value while following; <= 0: off
	log  *slog.Logger

	locked  bool // raft's FSM goroutine is locked to its thread
	base    int  // that thread's nice value before it was raised
	lowered bool // whether it is raised
}

// probeInPlace reports whether the agent may set a raised nice value back
// (tests replace it).
var probeInPlace = canRestoreThreadPriority

// newApplyThread returns the applyThread for cluster.Config's
// FollowerApplyNice (0: DefaultFollowerApplyNice; negative: off).
func newApplyThread(nice int, log *slog.Logger) *applyThread {
	if nice == 0 {
		nice = DefaultFollowerApplyNice
	}
	t := &applyThread{nice: nice, log: log}
	switch {
	case nice <= 0 || !threadNiceSupported:
		t.nice = 0
	case !probeInPlace():
		t.nice = 0
		log.Info("a follower applies at the agent's priority: this process may not set a thread's nice value back once raised; run it as root, or with CAP_SYS_NICE or an RLIMIT_NICE of 20 (systemd LimitNICE=+0, docker --ulimit nice=20), to let followers apply at a lower priority (--follower-apply-nice)")
	default:
		if base, err := threadNice(); err == nil && base >= 19 {
			t.nice = 0 // the agent already runs at the lowest priority
		}
	}
	return t
}

// set raises the calling thread's nice value for a follower's apply and
// sets it back for a leader's.
func (t *applyThread) set(follower bool) {
	if t == nil || t.nice <= 0 || follower == t.lowered {
		return
	}
	if !t.locked {
		// Never unlocked: the thread ends with raft's FSM goroutine, and
		// threads the runtime starts meanwhile come from its template
		// thread, not copies of this one.
		runtime.LockOSThread()
		base, err := threadNice()
		if err != nil {
			t.fail(err)
			return
		}
		t.locked, t.base = true, base
	}
	want := t.base
	if follower {
		want = min(t.base+t.nice, 19)
	}
	if err := setThreadNice(want); err != nil {
		t.fail(err)
		return
	}
	t.lowered = follower
}

// fail turns lowering off after an error (so it is told once), setting a
// raised thread back first if it can.
func (t *applyThread) fail(err error) {
	if t.lowered && setThreadNice(t.base) == nil {
		t.lowered = false
	}
	t.nice = 0
	t.log.Warn("a follower's applies run at the agent's priority", "err", err, "still_lowered", t.lowered)
}
