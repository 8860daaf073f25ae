package chaos

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Fault kinds the nemesis cycles through.
const (
	KillLeader      = "kill9-leader"
	KillFollower    = "kill9-follower"
	StopLeaderShort = "sigstop-leader-short"
	StopLeaderLong  = "sigstop-leader-long"
	IsolateLeader   = "isolate-leader"     // the leader alone: it is the minority
	PartitionMinor  = "partition-minority" // one follower alone, leader keeps the majority
	Bridge          = "bridge"             // leader and one follower cut; the other node sees both
	Loss            = "loss"               // every link: stalls (lost segments) and resets
	Delay           = "delay"              // every link: 40-100 ms per chunk
	KillAll         = "kill9-all"          // every node at once, then restarted
	SnapshotInstall = "snapshot-install"   // a follower down far behind, caught up by snapshot
	ClockSkew       = "clock-skew"         // a node with its clock ahead leads for a while
	Membership      = "membership"         // add a fourth node, remove a follower, under load
	RollingUpgrade  = "rolling-upgrade"    // every agent replaced by the next release, one at a time, then finalize
)

// Nemesis injects faults and measures failover: the time from injection
// until a write (queue.set) succeeds through a node of the majority side.
type Nemesis struct {
	log  *slog.Logger
	c    *Cluster
	Hold time.Duration // how long a fault lasts
	// Next is the binary a RollingUpgrade cycle upgrades the agents to.
	Next string

	mu          sync.Mutex
	Failover    map[string][]time.Duration
	Unrecovered []string
	Notes       []string
	Cycles      int
	probeN      atomic.Int64
	nextNode    int
}

// NewNemesis returns a nemesis for c.
func NewNemesis(log *slog.Logger, c *Cluster, hold time.Duration) *Nemesis {
	return &Nemesis{log: log, c: c, Hold: hold, Failover: map[string][]time.Duration{}, nextNode: len(c.Members()) + 1}
}

func (n *Nemesis) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	n.log.Info("nemesis: " + s)
	n.mu.Lock()
	n.Notes = append(n.Notes, s)
	n.mu.Unlock()
}

func others(all []*Agent, not ...*Agent) []*Agent {
	var out []*Agent
	for _, a := range all {
		if !slices.Contains(not, a) {
			out = append(out, a)
		}
	}
	return out
}

func ids(as []*Agent) []int {
	var out []int
	for _, a := range as {
		out = append(out, a.I)
	}
	return out
}

// probe writes through the nodes in via until one write succeeds or 30 s
// pass; it returns the time since t0 (-1 on timeout). Each try has its own
// connection and a 500 ms budget, so a call stuck on an agent does not hold
// the probe.
func (n *Nemesis) probe(t0 time.Time, via []*Agent) time.Duration {
	deadline := t0.Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		a := via[i%len(via)]
		k := int(n.probeN.Add(1))
		var out rpc.ChangedResult
		if err := call(a, 500*time.Millisecond, rpc.MethodQueueSet, rpc.QueueSetParams{Name: "chaos-probe", Concurrency: k}, &out); err == nil {
			return time.Since(t0)
		}
		time.Sleep(20 * time.Millisecond) // polling external processes
	}
	return -1
}

// waitUntil waits for the hold to end (it is the fault's duration, not a
// race widener).
func waitUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// Run performs one fault cycle of the kind: wait for a leader, inject,
// measure failover, hold, heal, and wait until every member is healthy
// again (a member that does not recover within 60 s is a gating failure).
func (n *Nemesis) Run(kind string) {
	c := n.c
	leader := c.WaitLeader(30 * time.Second)
	if leader == nil {
		n.mu.Lock()
		n.Unrecovered = append(n.Unrecovered, kind+": no leader before the fault")
		n.mu.Unlock()
		return
	}
	members := c.Members()
	fol := others(members, leader)
	f1, f2 := fol[0], fol[len(fol)-1]
	n.log.Info("nemesis: inject", "kind", kind, "leader", leader.ID)
	hold := n.Hold
	var via []*Agent // majority side, for the failover probe
	var heal func()
	t0 := time.Now()
	switch kind {
	case KillLeader:
		c.Kill9(leader)
		via, heal = fol, func() { _ = c.Start(leader) }
	case KillFollower:
		c.Kill9(f1)
		via, heal = others(members, f1), func() { _ = c.Start(f1) }
	case StopLeaderShort:
		c.Stop(leader)
		hold = 150 * time.Millisecond
		via, heal = fol, func() { c.Cont(leader) }
	case StopLeaderLong:
		c.Stop(leader)
		via, heal = fol, func() { c.Cont(leader) }
	case IsolateLeader:
		_ = c.Net.Partition([]int{leader.I}, ids(fol))
		via, heal = fol, func() { _ = c.Net.Heal() }
	case PartitionMinor:
		_ = c.Net.Partition([]int{f1.I}, ids(others(members, f1)))
		via, heal = others(members, f1), func() { _ = c.Net.Heal() }
	case Bridge:
		_ = c.Net.Cut(leader.I, f2.I)
		via, heal = []*Agent{leader, f1}, func() { _ = c.Net.Heal() }
	case Loss:
		for _, a := range members {
			for _, b := range members {
				if a.I < b.I {
					c.Faults.Set(a.I, b.I, LinkFault{Loss: 0.05, Reset: 0.01})
				}
			}
		}
		via, heal = members, c.Faults.Clear
	case Delay:
		for _, a := range members {
			for _, b := range members {
				if a.I < b.I {
					c.Faults.Set(a.I, b.I, LinkFault{Delay: 40 * time.Millisecond, Jitter: 60 * time.Millisecond})
				}
			}
		}
		via, heal = members, c.Faults.Clear
	case KillAll:
		var wg sync.WaitGroup
		for _, a := range members {
			wg.Add(1)
			go func() { defer wg.Done(); c.Kill9(a) }()
		}
		wg.Wait()
		for _, a := range members {
			_ = c.Start(a)
		}
		via, heal, hold = members, func() {}, 0
	case SnapshotInstall:
		n.snapshotInstall(leader, f1)
		via, heal, hold = nil, func() {}, 0
	case ClockSkew:
		n.clockSkew(leader, f1)
		via, heal, hold = nil, func() {}, 0
	case Membership:
		n.membership(leader, f1)
		via, heal, hold = nil, func() {}, 0
	case RollingUpgrade:
		n.rollingUpgrade(leader)
		via, heal, hold = nil, func() {}, 0
	default:
		panic("unknown fault " + kind)
	}
	injected := time.Since(t0) // the fault's own latency (a signal, an nft transaction), inside the failover
	// The heal is due at t0+hold whatever the probe is doing (a short
	// SIGSTOP must end after 150 ms, not after the failover).
	healed := make(chan struct{})
	go func() {
		defer close(healed)
		waitUntil(t0.Add(hold))
		heal()
	}()
	if len(via) > 0 {
		d := n.probe(t0, via)
		n.mu.Lock()
		n.Failover[kind] = append(n.Failover[kind], d)
		n.mu.Unlock()
		n.log.Info("nemesis: failover", "kind", kind, "took", d, "inject", injected)
	}
	<-healed
	if bad := c.WaitHealthy(60*time.Second, 200); len(bad) > 0 {
		for _, a := range bad {
			st := Status(a, time.Second)
			n.log.Error("node did not recover", "kind", kind, "node", a.ID, "status", st, "log", a.Tail(15))
			n.mu.Lock()
			n.Unrecovered = append(n.Unrecovered, fmt.Sprintf("%s: %s", kind, a.ID))
			n.mu.Unlock()
		}
	}
	n.mu.Lock()
	n.Cycles++
	n.mu.Unlock()
	n.log.Info("nemesis: healed", "kind", kind, "cycle_s", time.Since(t0).Seconds())
}

// snapshotInstall stops a follower, lets the leader commit past the
// trailing logs and snapshot, restarts the follower and checks (in its
// log) that it was sent a snapshot. The agents run with small snapshot
// settings (see BuildAgent).
func (n *Nemesis) snapshotInstall(leader, f *Agent) {
	c := n.c
	c.Kill9(f)
	st := Status(leader, time.Second)
	if st == nil {
		n.note("snapshot-install: leader %s did not answer", leader.ID)
		_ = c.Start(f)
		return
	}
	from := st.CommitIndex
	need := uint64(snapThreshold + trailingLogs + 200)
	deadline := time.Now().Add(90 * time.Second)
	var at uint64
	for time.Now().Before(deadline) {
		if l := c.Leader(others(c.Members(), f)...); l != nil {
			if s := Status(l, time.Second); s != nil && s.CommitIndex >= from+need {
				at = s.CommitIndex
				break
			}
		}
		time.Sleep(200 * time.Millisecond) // polling external processes
	}
	// Wait until a leader has a snapshot that compacted the log past the
	// follower's last entry (so it must be sent the snapshot).
	deadline = time.Now().Add(60 * time.Second)
	snapped := false
	for !snapped && time.Now().Before(deadline) {
		if l := c.Leader(others(c.Members(), f)...); l != nil && maxSnapshotIndex(l.Dir) > from+trailingLogs {
			snapped = true
			break
		}
		time.Sleep(200 * time.Millisecond) // polling external processes
	}
	if !snapped {
		n.note("snapshot-install: no leader snapshot past index %d within 60 s", from+trailingLogs)
	}
	before := logSize(f.LogPath)
	_ = c.Start(f)
	deadline = time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(f.LogPath); err == nil && int64(len(b)) > before && strings.Contains(string(b[before:]), "Installed remote snapshot") {
			n.note("snapshot-install: %s was sent a snapshot after falling %d entries behind (commit %d)", f.ID, at-from, at)
			return
		}
		time.Sleep(200 * time.Millisecond) // polling external processes
	}
	n.note("snapshot-install: %s caught up without a snapshot install (commit advanced %d while it was down)", f.ID, at-from)
}

// maxSnapshotIndex is the highest index among the raft snapshots in an
// agent's data dir (DIR/raft/snapshots/TERM-INDEX-MS).
func maxSnapshotIndex(dir string) uint64 {
	ents, _ := os.ReadDir(filepath.Join(dir, "raft", "snapshots"))
	var best uint64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if len(parts) == 3 {
			if v, err := strconv.ParseUint(parts[1], 10, 64); err == nil && v > best {
				best = v
			}
		}
	}
	return best
}

func logSize(p string) int64 {
	if fi, err := os.Stat(p); err == nil {
		return fi.Size()
	}
	return 0
}

// clockSkew restarts a follower with its clock 3 s ahead, hands it the
// leadership for a while under load, then hands leadership back to a node
// with the right clock and restarts the skewed one without the offset.
// Leases must stay right: the checkers count lease expiries of working
// workers (attempts spent by a fault).
func (n *Nemesis) clockSkew(leader, f *Agent) {
	c := n.c
	c.Term(f, 10*time.Second)
	_ = c.StartEnv(f, []string{"FLOWD_CHAOS_CLOCK_OFFSET=" + clockOffset.String()})
	if bad := c.WaitHealthy(30*time.Second, 200); len(bad) > 0 {
		n.note("clock-skew: %d members unhealthy after restarting %s with offset", len(bad), f.ID)
	}
	var out rpc.OK
	if err := call(leader, 10*time.Second, rpc.MethodRaftTransfer, rpc.PeerParams{ID: f.ID}, &out); err != nil {
		n.note("clock-skew: transfer to %s: %v", f.ID, err)
	}
	time.Sleep(n.Hold) // the skewed node leads for the hold, under load
	if l := c.Leader(); l != nil && l == f {
		n.note("clock-skew: %s (clock %s ahead) led for %s", f.ID, clockOffset, n.Hold)
		if err := call(f, 10*time.Second, rpc.MethodRaftTransfer, rpc.PeerParams{ID: leader.ID}, &out); err != nil {
			n.note("clock-skew: transfer back to %s: %v", leader.ID, err)
		}
	} else {
		n.note("clock-skew: %s did not become leader", f.ID)
	}
	time.Sleep(n.Hold) // a right-clock leader after a skewed one, under load
	c.Term(f, 10*time.Second)
	_ = c.Start(f)
}

// membership adds node N+1 (started with --peers plus itself, then
// operator.raft.add_peer), waits until it has caught up, then removes the
// follower f (operator.raft.remove_peer) and stops it. The test's member
// list follows.
func (n *Nemesis) membership(leader, f *Agent) {
	c := n.c
	i := n.nextNode
	a := c.Agent(i)
	if a == nil {
		n.note("membership: no spare namespace for n%d", i)
		return
	}
	n.nextNode++
	if err := c.StartJoining(a); err != nil {
		n.note("membership: start %s: %v", a.ID, err)
		return
	}
	var out rpc.PeersResult
	if err := call(leader, 20*time.Second, rpc.MethodRaftAddPeer, rpc.PeerParams{ID: a.ID, Address: a.RaftProx.Addr()}, &out); err != nil {
		n.note("membership: add %s: %v", a.ID, err)
		return
	}
	c.SetMembers(append(ids(c.Members()), i))
	if bad := c.WaitHealthy(60*time.Second, 200); len(bad) > 0 {
		n.note("membership: %d members not healthy after adding %s", len(bad), a.ID)
	}
	if err := call(leader, 20*time.Second, rpc.MethodRaftRemovePeer, rpc.PeerParams{ID: f.ID}, &out); err != nil {
		// leadership may have moved: any member forwards
		if err2 := call(a, 20*time.Second, rpc.MethodRaftRemovePeer, rpc.PeerParams{ID: f.ID}, &out); err2 != nil {
			n.note("membership: remove %s: %v / %v", f.ID, err, err2)
			return
		}
	}
	c.SetMembers(ids(others(c.Members(), f)))
	c.Term(f, 10*time.Second)
	n.note("membership: added %s, removed %s under load", a.ID, f.ID)
}

// Percentiles of one fault kind's failovers: p50 and max.
func p50max(ds []time.Duration) (time.Duration, time.Duration) {
	var ok []time.Duration
	for _, d := range ds {
		if d >= 0 {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return -1, -1
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i] < ok[j] })
	return ok[(len(ok)-1)/2], ok[len(ok)-1]
}

// rollingUpgrade replaces every member's binary with the next release, one
// at a time (followers first, the leader last: a graceful stop hands
// leadership over), waiting for the cluster to be healthy after each, then
// finalizes the upgrade and checks the cluster moved to the next release's
// version (this release's newest plus one). Agents
// started later run the next release.
func (n *Nemesis) rollingUpgrade(leader *Agent) {
	c := n.c
	if n.Next == "" {
		n.note("rolling-upgrade: no next release was built")
		return
	}
	order := append(others(c.Members(), leader), leader)
	for _, a := range order {
		c.Term(a, 15*time.Second)
		a.Bin = n.Next
		if err := c.Start(a); err != nil {
			n.note("rolling-upgrade: start %s: %v", a.ID, err)
			return
		}
		if bad := c.WaitHealthy(60*time.Second, 200); len(bad) > 0 {
			n.note("rolling-upgrade: %d members not healthy after upgrading %s", len(bad), a.ID)
		}
	}
	c.SetBin(n.Next)
	var res rpc.UpgradeResult
	var err error
	for _, a := range c.Members() { // any member forwards to the leader
		if err = call(a, 20*time.Second, rpc.MethodUpgradeFinalize, struct{}{}, &res); err == nil {
			break
		}
	}
	// The next release (built with -tags flowd_testv2) applies one version
	// more than this one.
	if want := int(fsm.MaxVersion) + 1; err != nil || res.To != want {
		n.note("rolling-upgrade: finalize: %+v %v", res, err)
		n.mu.Lock()
		n.Unrecovered = append(n.Unrecovered, "rolling-upgrade: not finalized")
		n.mu.Unlock()
		return
	}
	n.note("rolling-upgrade: %d agents upgraded under load, state-machine version %d -> %d", len(order), res.From, res.To)
}
