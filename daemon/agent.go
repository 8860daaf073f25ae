package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/rpc"
)

// Agent is one running flowd daemon: a cluster node, the client protocol on
// its Unix socket (and optional TCP listener), the inter-node forwarding
// listener, and the HTTP health/metrics endpoint.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	specs   specCache    // parsed run.submit specs (speccache.go)
	upgrade upgradeState // the leader's auto-finalize clock (upgrade.go)
	fresh   freshGate    // a fresh cluster's first writes wait for its version (upgrade_fresh.go)
	// unknownClaims: claims this agent gave a request id (the client sent
	// none) whose outcome is unknown; the worker's next claim re-sends the
	// id (taskClaim).
	unknownClaims rpc.ClaimMemo
	// node is the cluster member, for lifecycle (Run, Shutdown), metrics
	// and the operator methods; handlers otherwise go through prop and
	// state (the seam, seam.go). nil in agents wired for handler tests.
	node Node

	prop    proposer    // the node: proposals, claims, leadership
	state   stateReader // the node's FSM: replicated state as applied here
	proxy   *leaderProxy
	srv     *rpc.Server // clients: unix socket, optional TCP
	fwdSrv  *rpc.Server // other agents forwarding to this one as leader
	httpSrv *http.Server
	workers *workerRegistry
	rate    *rateMeter
	metrics *metrics
	tls     *pki.Store        // nil: plaintext between nodes (tls.go)
	tokens  tokenConns        // TCP client connections by ACL token (acl.go)
	snaps   transfers         // open snapshot transfers (snapshot_transfer.go)
	meta    map[string]string // the addresses this agent publishes (publish.go)
	// snapSched is the scheduled snapshots' state (snapshot_schedule.go).
	snapSched snapshotSchedule

	mu          sync.Mutex
	listeners   []net.Listener
	subs        map[subKey]context.CancelFunc
	subsPerConn map[any]int
}

type forwardedKey struct{}

// isForwarded reports whether the request came from another agent: it is
// served here or fails, never forwarded again.
func isForwarded(ctx context.Context) bool { return ctx.Value(forwardedKey{}) != nil }

// New binds every listener and opens the node through cfg.OpenNode, so
// errors such as a port or socket in use surface before Run.
func New(cfg Config, log *slog.Logger) (*Agent, error) {
	if cfg.OpenNode == nil {
		return nil, errors.New("daemon.Config.OpenNode is not set: the caller opens the cluster node (daemon.NodeOpener(raftnode.Open))")
	}
	if err := cfg.Normalize(); err != nil {
		return nil, err
	}
	if err := cfg.CheckTransportSecurity(); err != nil {
		return nil, err
	}
	if log == nil {
		log = NewLogger(cfg.LogLevel, cfg.LogFormat)
	}
	peers, _ := cluster.ParsePeers(cfg.Peers)
	a := newAgent(cfg, log)
	if err := a.setupTLS(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			a.closeListeners()
			if a.node != nil {
				_ = a.node.Shutdown()
			}
		}
	}()
	// Bind the listeners first: failing on a busy port must not leave a
	// half-started raft node behind.
	sock, err := listenUnix(cfg.Socket)
	if err != nil {
		return nil, err
	}
	a.listeners = append(a.listeners, sock)
	fwdL, err := net.Listen("tcp", cfg.ForwardAddr)
	if err != nil {
		return nil, fmt.Errorf("forwarding listener on %s: %w (set --forward-addr)", cfg.ForwardAddr, err)
	}
	a.listeners = append(a.listeners, fwdL)
	var clientL, httpL net.Listener
	if cfg.ClientAddr != "" {
		if clientL, err = net.Listen("tcp", cfg.ClientAddr); err != nil {
			return nil, fmt.Errorf("client listener on %s: %w", cfg.ClientAddr, err)
		}
		a.listeners = append(a.listeners, clientL)
	}
	if cfg.HTTPAddr != "" {
		if httpL, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("http listener on %s: %w", cfg.HTTPAddr, err)
		}
		a.listeners = append(a.listeners, httpL)
	}
	meta := map[string]string{"forward": cfg.ForwardAdvertise, "socket": cfg.Socket}
	if cfg.ClientAddr != "" {
		meta["client"] = cfg.ClientAddr
	}
	a.meta = meta
	autoPeriod, autoWindow := autoTiming(log) // adaptive concurrency (autoconc.go)
	snapThreshold, trailingLogs, snapInterval := raftCompaction(log)
	node, err := cfg.OpenNode(cluster.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, RaftBind: cfg.RaftAddr, Advertise: cfg.RaftAdvertise,
		Peers: peers, Logger: log, Meta: meta, TLS: a.clusterTLS(),
		RaftMultiplier: cfg.RaftMultiplier, HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
		LeaderLeaseTimeout: cfg.LeaderLeaseTimeout, CommitTimeout: cfg.CommitTimeout,
		LogCacheBytes: cfg.RaftLogCacheBytes, StateCacheBytes: cfg.StateCacheBytes, StateWriteWindow: cfg.stateWriteWindow(), RaftLogStore: cfg.RaftLogStore,
		FollowerApplyNice: cfg.followerApplyNice(),
		DigestInterval:    digestInterval(log), MinFreeBytes: minFreeBytes(log),
		AutoPeriod: autoPeriod, AutoWindow: autoWindow,
		SnapshotThreshold: snapThreshold, TrailingLogs: trailingLogs, SnapshotInterval: snapInterval,
		CallerOf: rpc.ConnIdentity, // the group commit's linger (raftnode/batcher.go)
	})
	if err != nil {
		return nil, err
	}
	a.node = node
	a.wire(a.node, a.node.FSM())
	a.node.StartAutopilot(a, a.autopilotConfig()) // server health, dead-server cleanup (autopilot.go)
	a.node.FSM().SetCommitHook(a.commitHook)
	if a.tls != nil {
		a.proxy.dial = a.tlsForwardDialer()
	}
	a.rate = newRateMeter(a.node.FSM())
	methods := a.audited(a.methods()) // admin calls logged (audit.go)
	opts, err := a.clientOptions()
	if err != nil {
		return nil, err
	}
	a.srv = rpc.NewServer(a.metrics.instrument(a.refuseUnhealthy(methods)), opts)
	// The forwarding port serves only what followers forward (tls.go).
	fwdMethods := make(map[string]rpc.Handler, len(methods))
	for name, h := range methods {
		if !forwardable(name) {
			continue
		}
		fwdMethods[name] = func(ctx context.Context, raw json.RawMessage) (any, error) {
			return h(context.WithValue(ctx, forwardedKey{}, true), raw)
		}
	}
	fwdMethods = a.refuseUnhealthy(fwdMethods)
	fwdMethods[methodPublish] = rpc.Func(a.servePublish) // publish.go
	fwdMethods[methodForward] = serveForwarded(maps.Clone(fwdMethods))
	fwdMethods[methodMemberInfo] = rpc.Func(a.memberInfo) // members' versions (upgrade.go)
	a.fwdSrv = rpc.NewServer(fwdMethods, rpc.Options{MaxLine: cfg.MaxLine, Logger: log.With("component", "forward"), Admit: forwardAdmit})
	if clientL != nil {
		clientL = a.clientListener(clientL) // TLS and tokens (acl.go)
		go a.watchTokens(a.stopCtx())
	}
	a.startServing(sock, a.forwardListener(fwdL), clientL, httpL)
	go a.upgradeLoop(a.stopCtx())
	ok = true
	return a, nil
}

func newAgent(cfg Config, log *slog.Logger) *Agent {
	a := &Agent{cfg: cfg, log: log, subs: map[subKey]context.CancelFunc{}, subsPerConn: map[any]int{}, workers: newWorkerRegistry()}
	a.workers.idleAfter.Store(int64(cfg.IdleTypeAfter))
	return a
}

// commitHook sees each commit's events (on the FSM's goroutine): the
// leader's task histograms and the log of leases no worker acknowledged.
func (a *Agent) commitHook(evs []fsm.Event) {
	a.metrics.tasks.observe(evs)
	a.metrics.orphans.observe(evs)
}

// wire sets up what the handlers use around p and s: in New the node and
// its FSM; in tests, a test cluster's node (or a fake) without listeners.
func (a *Agent) wire(p proposer, s stateReader) {
	a.prop, a.state = p, s
	a.proxy = newLeaderProxy(a.cfg.NodeID, p, s, a.log)
	a.metrics = newMetrics(a)
}

func (a *Agent) startServing(sock, fwdL, clientL, httpL net.Listener) {
	ctx := context.Background()
	serve := func(s *rpc.Server, l net.Listener, what string) {
		go func() {
			if err := s.Serve(ctx, l); err != nil && !errors.Is(err, rpc.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				a.log.Error("listener stopped", "listener", what, "err", err)
			}
		}()
	}
	serve(a.srv, sock, "socket")
	serve(a.fwdSrv, fwdL, "forward")
	if clientL != nil {
		serve(a.srv, clientL, "client")
	}
	if httpL != nil {
		// Write timeout: a client that stops reading cannot hold a
		// connection; with --pprof it must outlast a default 30 s profile.
		wt := 15 * time.Second
		if a.cfg.Pprof {
			wt = 65 * time.Second
		}
		a.httpSrv = &http.Server{Handler: a.httpHandler(), ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second, WriteTimeout: wt, IdleTimeout: time.Minute}
		go func() {
			if err := a.httpSrv.Serve(httpL); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("http listener stopped", "err", err)
			}
		}()
	}
	go a.rate.run(a.stopCtx())
	if a.prop != nil {
		go a.watchOffice(a.stopCtx())
	}
	a.removeStaleTemps()
	go a.publishLoop(a.stopCtx())
	go a.transferJanitor(a.stopCtx())
	if a.cfg.SnapshotInterval > 0 {
		go a.runSnapshotSchedule(a.stopCtx())
	}
	a.log.Info("agent started", "node", a.cfg.NodeID, "socket", a.cfg.Socket, "raft", a.cfg.RaftAddr,
		"forward", a.cfg.ForwardAddr, "client", a.cfg.ClientAddr, "http", a.cfg.HTTPAddr, "raft_timing", a.cfg.RaftTiming().String())
}

func (a *Agent) stopCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-a.node.Stopped()
		cancel()
	}()
	return ctx
}

// Node returns the agent's cluster node (what Config.OpenNode opened).
func (a *Agent) Node() Node { return a.node }

// Config returns the normalized config.
func (a *Agent) Config() Config { return a.cfg }

// Run serves until ctx is done, then shuts down gracefully.
func (a *Agent) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-a.node.Stopped():
		return errors.New("cluster node stopped")
	case <-a.node.Failed():
		// Local storage failed (cluster/raftnode/storage.go): stop now, handing
		// leadership over; the caller exits with ExitStorage.
		// The stores may not close (badger retries a flush to a vanished
		// dir forever): the wait is bounded, and the process exits anyway.
		err := a.node.Failure()
		done := make(chan struct{})
		go func() { _ = a.Shutdown(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			a.log.Error("the failed stores did not close; exiting without them (on restart the node recovers from its raft log and the leader)")
		}
		return err
	}
	return a.Shutdown()
}

// Shutdown stops gracefully: it stops accepting clients, answers the
// requests in flight, hands leadership to another node (milliseconds,
// instead of an election after a timeout), and stops raft.
func (a *Agent) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	a.log.Info("shutting down")
	a.mu.Lock()
	for _, c := range a.subs {
		c()
	}
	a.mu.Unlock()
	if a.httpSrv != nil {
		_ = a.httpSrv.Shutdown(ctx)
	}
	if a.node.IsLeader() && len(a.node.Servers()) > 1 {
		if err := a.node.TransferLeadership(""); err != nil {
			a.log.Warn("leadership transfer failed; the others will elect a leader after a timeout", "err", err)
		}
	}
	_ = a.srv.Shutdown(ctx)
	_ = a.fwdSrv.Shutdown(ctx)
	a.proxy.close()
	a.closeListeners()
	err := a.node.Shutdown()
	a.log.Info("stopped")
	return err
}

func (a *Agent) closeListeners() {
	for _, l := range a.listeners {
		_ = l.Close()
	}
	a.listeners = nil
}
