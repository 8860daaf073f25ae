package raftnode

import (
	autopilot "github.com/hashicorp/raft-autopilot"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Config configures a Node: the agent's settings (cluster.Config) and the
// test hooks, any of which replaces the production component.
type Config struct {
	cluster.Config

	Transport     raft.Transport
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
	Store         store.Store
	Clock         func() time.Time
	// DisableLoops keeps the leader from running the reaper, retry tick and
	// GC (tests that drive time by hand).
	DisableLoops bool

	// skipCatchUp: openStores leaves a state store that is behind the
	// newest snapshot as it is (Inspect reads a data dir without changing it).
	skipCatchUp bool
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	t := cluster.RaftTiming{Multiplier: c.RaftMultiplier, Heartbeat: c.HeartbeatTimeout, Election: c.ElectionTimeout, LeaderLease: c.LeaderLeaseTimeout}.Resolve()
	c.RaftMultiplier, c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = t.Multiplier, t.Heartbeat, t.Election, t.LeaderLease
	if c.CommitTimeout == 0 {
		c.CommitTimeout = cluster.DefaultCommitTimeout
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 16384
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 30 * time.Second
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Advertise == "" {
		c.Advertise = c.RaftBind
	}
}

// Node is one flowd cluster member: it owns raft, the replicated FSM and
// the leader-only loops.
//
// Concurrency: every exported method is safe for concurrent use. Propose and
// Claim may be called from any goroutine; they fail with *NotLeaderError on
// a follower.
type Node struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	fsm   *fsm.FSM
	store store.Store
	trans raft.Transport

	closers []io.Closer
	disp    *Dispatcher
	auto    autoWindow // adaptive concurrency latencies (leader memory)
	batch   *batcher

	obsCh    chan raft.Observation
	observer *raft.Observer
	// epoch is cancelled (and replaced) at every leadership or raft state
	// change the monitor sees: see LeaderEpoch.
	sigMu       sync.Mutex
	epoch       context.Context
	epochCancel context.CancelFunc

	mu           sync.Mutex
	ap           *autopilot.Autopilot // nil: off (autopilot.go)
	apd          *apDelegate
	apSet        chan struct{} // closed by StartAutopilot
	leaderCancel context.CancelFunc
	leaderDone   chan struct{}
	isLeader     atomic.Bool
	ready        chan struct{} // closed once this term's barrier is applied

	// Storage health (storage.go) and the digest check (digestcheck.go).
	failOnce sync.Once
	failure  atomic.Pointer[error] // a *StorageFailure or *fsm.VersionError
	failed   chan struct{}
	disk     *diskGuard
	digest   *digestState
	// applyThread runs the applies while following at a lower priority
	// (applythread.go).
	applyThread *applyThread
	// raftLive is raft once NewRaft returned, for IsLeader: raft's FSM
	// goroutine applies (replays the log) before n.raft is set.
	raftLive atomic.Pointer[raft.Raft]

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	leaderChanges atomic.Uint64 // terms this node took office (LeaderChanges)
	logStore      string        // cluster.LogStoreBolt or LogStoreWAL (logstore.go)
}

// Open is New with the agent's settings and no test hooks: what the
// composition root (cmd/flowd's agent command, testagents) hands the daemon.
func Open(cfg cluster.Config) (*Node, error) { return New(Config{Config: cfg}) }

// New opens the node's stores, restores its state, bootstraps the initial
// configuration if this data dir has never held one, and starts raft.
func New(cfg Config) (*Node, error) {
	cfg.defaults()
	if cfg.NodeID == "" {
		return nil, errors.New("node id is required (--node-id)")
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), stop: make(chan struct{}), failed: make(chan struct{}),
		apSet: make(chan struct{})}
	n.digest = newDigestState(n)
	n.applyThread = newApplyThread(cfg.FollowerApplyNice, n.log)
	ok := false
	defer func() {
		if !ok {
			n.closeAll()
		}
	}()
	if err := n.openStores(); err != nil {
		return nil, err
	}
	if err := n.startRaft(); err != nil {
		return nil, err
	}
	n.disp = newDispatcher(n)
	n.batch = newBatcher(n)
	n.epoch, n.epochCancel = context.WithCancel(context.Background())
	n.obsCh = make(chan raft.Observation, 64)
	n.observer = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(n.observer)
	n.wg.Add(1)
	go n.monitorLeadership()
	ok = true
	return n, nil
}

func (n *Node) openStores() error {
	cfg := n.cfg
	if cfg.DataDir != "" {
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, "raft"), 0o750); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
	}
	n.store = cfg.Store
	var badgerStore *store.BadgerStore
	if n.store == nil {
		bs, err := fsm.OpenBadger(filepath.Join(cfg.DataDir, "state"), store.BadgerOptions{Logger: n.log, BlockCacheSize: cfg.StateCacheBytes})
		if err != nil {
			return err
		}
		badgerStore = bs
		var under store.Store = bs
		if cfg.StateWriteWindow >= 0 {
			under = store.NewWriteBehind(bs, cfg.StateWriteWindow) // closes bs, after writing its window
		}
		n.closers = append(n.closers, under)
		idx, err := fsm.NewIndexedStore(under)
		if err != nil {
			return err
		}
		n.store = idx
	}
	f, err := fsm.New(n.store, fsm.Options{Logger: n.log})
	if err != nil {
		return err
	}
	n.fsm = f
	if err := f.CheckVersion(); err != nil {
		return err // this binary cannot serve the stored state's version
	}
	if cfg.LogStore == nil || cfg.StableStore == nil {
		logs, stable, err := n.openRaftStores() // logstore.go: bolt or wal
		if err != nil {
			return err
		}
		if n.cfg.LogStore == nil {
			n.cfg.LogStore = newByteBoundedLogCache(&checkedLogStore{LogStore: logs, n: n}, cfg.LogCacheBytes)
		}
		if n.cfg.StableStore == nil {
			n.cfg.StableStore = &checkedStableStore{StableStore: stable, n: n}
		}
	}
	switch n.cfg.LogStore.(type) {
	case *byteBoundedLogCache, *raft.LogCache: // checked underneath
	default:
		n.cfg.LogStore = &checkedLogStore{LogStore: n.cfg.LogStore, n: n} // a test's store
	}
	if err := n.guardStores(badgerStore); err != nil {
		return err
	}
	if n.cfg.SnapshotStore == nil {
		ss, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.DataDir, "raft"), 2, NewHCLogger(n.log, "snapshot"))
		if err != nil {
			return fmt.Errorf("open snapshot store: %w", err)
		}
		n.cfg.SnapshotStore = ss
	}
	if n.cfg.skipCatchUp {
		return nil
	}
	return n.catchUpFromSnapshot()
}

// catchUpFromSnapshot restores the newest raft snapshot into the FSM when
// the local state is older than it (a lost or fresh state dir next to an
// existing raft log). raft itself is told not to restore on start, because
// badger is persistent and normally ahead of the snapshot.
func (n *Node) catchUpFromSnapshot() error {
	metas, err := n.cfg.SnapshotStore.List()
	if err != nil || len(metas) == 0 {
		return err
	}
	newest := metas[0]
	if n.fsm.AppliedIndex() >= newest.Index {
		return nil
	}
	n.log.Warn("local state is behind the newest snapshot; restoring it", "applied", n.fsm.AppliedIndex(), "snapshot", newest.Index)
	_, rc, err := n.cfg.SnapshotStore.Open(newest.ID)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := n.fsm.Restore(rc); err != nil {
		return err
	}
	return n.fsm.CheckVersion()
}

func (n *Node) startRaft() error {
	cfg := n.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 512
	rc.NoSnapshotRestoreOnStart = true
	// Per-peer metrics only with a peer label, not also with the peer's id
	// in the key (one metric name per node id).
	rc.NoLegacyTelemetry = true
	rc.Logger = NewHCLogger(n.log, "raft")

	n.trans = cfg.Transport
	var stream *tlsStream
	if n.trans == nil && cfg.TLS != nil {
		adv, err := resolveAdvertise(cfg.Advertise)
		if err != nil {
			return err
		}
		stream, err = newTLSStream(cfg.RaftBind, adv, cfg.TLS, 5*time.Second, n.log.With("component", "raft-tls"))
		if err != nil {
			return fmt.Errorf("raft transport on %s: %w (is the port in use? set --raft-addr)", cfg.RaftBind, err)
		}
		t := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream: stream, MaxPool: raftMaxPool, Timeout: 5 * time.Second, Logger: NewHCLogger(n.log, "transport"),
		})
		n.trans = newVoteTransport(t, raftMaxPool) // transport.go: elections survive stale pooled connections
		n.closers = append(n.closers, t)
	} else if n.trans == nil {
		adv, err := resolveAdvertise(cfg.Advertise)
		if err != nil {
			return err
		}
		t, err := raft.NewTCPTransportWithLogger(cfg.RaftBind, adv, raftMaxPool, 5*time.Second, NewHCLogger(n.log, "transport"))
		if err != nil {
			return fmt.Errorf("raft transport on %s: %w (is the port in use? set --raft-addr)", cfg.RaftBind, err)
		}
		n.trans = newVoteTransport(t, raftMaxPool)
		n.closers = append(n.closers, t)
	}
	has, err := raft.HasExistingState(cfg.LogStore, cfg.StableStore, cfg.SnapshotStore)
	if err != nil {
		return err
	}
	if !has {
		peers := cfg.Peers
		if len(peers) == 0 {
			peers = []cluster.Peer{{ID: cfg.NodeID, Address: string(n.trans.LocalAddr())}}
		}
		conf := raft.Configuration{}
		for _, p := range peers {
			conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Address), Suffrage: raft.Voter})
		}
		if err := raft.BootstrapCluster(rc, cfg.LogStore, cfg.StableStore, cfg.SnapshotStore, n.trans, conf); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, &raftFSM{f: n.fsm, n: n}, cfg.LogStore, cfg.StableStore, cfg.SnapshotStore, n.trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.raftLive.Store(r)
	if stream != nil {
		stream.setServers(func() []raft.Server { return r.GetConfiguration().Configuration().Servers })
	}
	return nil
}

func resolveAdvertise(addr string) (net.Addr, error) {
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", addr, err)
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft advertise address %q is unspecified; set --raft-advertise to an address peers can reach", addr)
	}
	return tcp, nil
}

// FSM returns the node's state machine (for reads).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft returns the underlying raft (operator tooling, tests).
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Now returns the leader clock reading used to stamp commands.
func (n *Node) Now() time.Time { return n.cfg.Clock() }

// IsLeader reports whether raft says this node is the leader (its loops
// start after a barrier; see LoopsRunning). Raft's FSM goroutine asks it
// while it replays the log, before NewRaft returns: false until then.
func (n *Node) IsLeader() bool {
	r := n.raftLive.Load()
	return r != nil && r.State() == raft.Leader
}

// Leader returns the current leader's id and raft address ("" if none).
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &cluster.NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// Propose stamps cmd with the leader clock, replicates it and returns the
// FSM's result and the entry's index. An error result of Apply is returned
// as the error (with the index). On a follower it returns *NotLeaderError
// without proposing.
func (n *Node) Propose(ctx context.Context, cmd fsm.Command) (any, uint64, error) {
	if n.raft.State() != raft.Leader {
		return nil, 0, n.notLeader()
	}
	now := n.cfg.Clock().UnixMilli()
	cmd.Stamp(now)
	buf, err := fsm.Encode(cmd)
	if err != nil {
		return nil, 0, err
	}
	return n.proposeEncoded(ctx, buf)
}

// awaiter is a raft future that can be waited on until a cancel channel
// closes (internal/hashicorp-raft's patch, DESIGN.md). Upstream raft's
// futures are not: they are waited on in a goroutine of their own.
type awaiter interface {
	Await(cancel1, cancel2 <-chan struct{}) (error, bool)
}

// awaitFuture waits for fut's error until done or stop closes (answered
// false).
func awaitFuture(fut raft.Future, done, stop <-chan struct{}) (err error, answered bool) {
	if aw, ok := fut.(awaiter); ok {
		return aw.Await(done, stop)
	}
	ch := make(chan error, 1)
	go func() { ch <- fut.Error() }()
	select {
	case err = <-ch:
		return err, true
	case <-done:
	case <-stop:
	}
	return nil, false
}

// proposeEncoded replicates an encoded, stamped command (see Propose).
func (n *Node) proposeEncoded(ctx context.Context, buf []byte) (any, uint64, error) {
	if n.raft.State() != raft.Leader {
		return nil, 0, n.notLeader()
	}
	var err error
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	fut := n.raft.Apply(buf, timeout)
	err, answered := awaitFuture(fut, ctx.Done(), n.stop)
	if !answered {
		if ctx.Err() != nil {
			return nil, 0, &domain.UnavailableError{Reason: "the command did not commit in time (" + ctx.Err().Error() + "); its outcome is unknown", RetryAfter: 250 * time.Millisecond}
		}
		return nil, 0, cluster.ErrShutdown
	}
	if err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			return nil, 0, n.notLeader()
		case errors.Is(err, raft.ErrLeadershipLost):
			return nil, 0, &domain.UnavailableError{Reason: cluster.ErrLeadershipLost.Error(), RetryAfter: 250 * time.Millisecond, Cause: cluster.ErrLeadershipLost}
		case errors.Is(err, raft.ErrLeadershipTransferInProgress):
			// Refused before it was appended: not applied, safe to retry
			// (the new leader answers in milliseconds).
			return nil, 0, &domain.UnavailableError{Reason: "a leadership transfer is in progress; the command was not applied", RetryAfter: 100 * time.Millisecond}
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, 0, &domain.UnavailableError{Reason: cluster.ErrShutdown.Error(), RetryAfter: time.Second}
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, 0, &domain.UnavailableError{Reason: "raft is overloaded or has no quorum: " + err.Error(), RetryAfter: 500 * time.Millisecond}
		}
		return nil, 0, err
	}
	idx := fut.Index()
	resp := fut.Response()
	if e, ok := resp.(error); ok {
		return nil, idx, e
	}
	return resp, idx, nil
}

// Barrier waits until every entry committed before it is applied locally.
// Only the leader can issue one.
func (n *Node) Barrier(ctx context.Context) error {
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	err := n.raft.Barrier(timeout).Error()
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrEnqueueTimeout):
		// A barrier changes nothing: retrying it (on the next leader) is
		// safe. As an internal error a consistent read that met an
		// election (or a lost quorum) was not retried, nor did the CLI
		// fall back to local state.
		return &domain.UnavailableError{Reason: "no leader to read from: " + err.Error() + "; retry", RetryAfter: 250 * time.Millisecond}
	}
	return err
}

// WaitForLeader blocks until the cluster has a leader.
func (n *Node) WaitForLeader(ctx context.Context) (string, error) {
	for {
		ch := make(chan raft.Observation, 1)
		obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
			_, ok := o.Data.(raft.LeaderObservation)
			return ok
		})
		n.raft.RegisterObserver(obs)
		id, _ := n.Leader()
		if id != "" {
			n.raft.DeregisterObserver(obs)
			return id, nil
		}
		select {
		case <-ch:
			n.raft.DeregisterObserver(obs)
		case <-ctx.Done():
			n.raft.DeregisterObserver(obs)
			return "", n.notLeader()
		}
	}
}

// WaitForApplied blocks until the local FSM has applied index.
func (n *Node) WaitForApplied(ctx context.Context, index uint64) error {
	for {
		ch := n.fsm.Changed()
		if n.fsm.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("applied index %d did not reach %d: %w", n.fsm.AppliedIndex(), index, ctx.Err())
		}
	}
}

// Shutdown stops the leader loops and raft and closes the stores. It does
// not transfer leadership; call TransferLeadership first for a graceful stop.
func (n *Node) Shutdown() error {
	var err error
	n.stopOnce.Do(func() {
		close(n.stop)
		if n.raft != nil {
			n.raft.DeregisterObserver(n.observer)
		}
		n.revokeLeadership()
		n.wg.Wait()
		if n.raft != nil {
			err = n.raft.Shutdown().Error()
		}
		n.closeAll()
	})
	return err
}

func (n *Node) closeAll() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		if err := n.closers[i].Close(); err != nil {
			n.log.Warn("close", "err", err)
		}
	}
	n.closers = nil
}

// Stopped is closed when Shutdown begins.
func (n *Node) Stopped() <-chan struct{} { return n.stop }

// WaitLeaderChange blocks until raft reports a leadership or state change,
// ctx ends, or max passes.
func (n *Node) WaitLeaderChange(ctx context.Context, max time.Duration) {
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-n.LeaderEpoch().Done():
	case <-ctx.Done():
	case <-t.C:
	}
}

// LeaderEpoch returns a context cancelled at the next leadership or raft
// state change (take it before reading Leader): how a request forwarded to
// the leader learns at once that it must go elsewhere. One context serves
// every waiter (context.AfterFunc on it costs no goroutine).
func (n *Node) LeaderEpoch() context.Context {
	n.sigMu.Lock()
	defer n.sigMu.Unlock()
	return n.epoch
}

func (n *Node) signalLeaderChange() {
	n.sigMu.Lock()
	n.epochCancel()
	n.epoch, n.epochCancel = context.WithCancel(context.Background())
	n.sigMu.Unlock()
}
