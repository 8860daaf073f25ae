package tui

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// Client is the part of the flowd protocol the TUI calls: a subset of
// *rpc.Client's methods plus the schedule calls (rpc/schedrpc).
// Commands capture a Client value and call it from their own goroutine, so
// implementations must be safe for concurrent use.
type Client interface {
	rpcCalls
	Schedules(ctx context.Context) (*schedrpc.ListResult, error)
	SchedulePause(ctx context.Context, id string, pause bool) (*rpc.ChangedResult, error)
	ScheduleTrigger(ctx context.Context, id, runID string) (*schedrpc.FireResult, error)
	ScheduleDelete(ctx context.Context, id string) (*rpc.ChangedResult, error)
}

// rpcCalls are the calls *rpc.Client serves itself.
type rpcCalls interface {
	RunList(ctx context.Context, p rpc.ListParams) (*rpc.ListResult, error)
	RunGet(ctx context.Context, id string) (*rpc.Run, error)
	TaskGet(ctx context.Context, id string) (*rpc.Task, error)
	RunVerb(ctx context.Context, method, id, reason string) (*rpc.ChangedResult, error)
	RunReplay(ctx context.Context, p rpc.ReplayParams) (*rpc.SubmitResult, error)
	QueueList(ctx context.Context) (*rpc.QueueListResult, error)
	QueuePause(ctx context.Context, name, runID string, pause bool) (*rpc.ChangedResult, error)
	WorkersList(ctx context.Context) (*rpc.WorkersResult, error)
	ClusterStatus(ctx context.Context) (*rpc.ClusterStatus, error)
	ClusterStats(ctx context.Context) (*rpc.ClusterStats, error)
	EventsList(ctx context.Context, p rpc.EventsListParams) (*rpc.EventsListResult, error)
	TaskLogs(ctx context.Context, p rpc.TaskLogsParams) (*rpc.TaskLogsResult, error)
	TaskSignal(ctx context.Context, p rpc.TaskSignalParams) (*rpc.SignalResult, error)
	RunSubmit(ctx context.Context, p rpc.SubmitParams) (*rpc.SubmitResult, error)
	TaskList(ctx context.Context, p rpc.TaskListParams) (*rpc.TaskListResult, error)
	RunRetry(ctx context.Context, p rpc.RetryParams) (*rpc.RetryResult, error)
}

var (
	_ rpcCalls = (*rpc.Client)(nil)
	_ Client   = (*Live)(nil)
)

// NodeStatus is one endpoint's answer to cluster.status.
type NodeStatus struct {
	Endpoint string
	Status   *rpc.ClusterStatus // nil when the endpoint did not answer
	Err      error
	RTT      time.Duration
}

// Prober asks every endpoint of --addr for its own view of the cluster
// (the header's peers-up count and the cluster screen).
type Prober interface {
	Probe(ctx context.Context) []NodeStatus
}

// Messages of the connection manager.

type connState int

const (
	connConnecting connState = iota // first dial in progress
	connLive                        // subscribed; events flow
	connDown                        // lost; waiting to retry (RetryAt)
)

// connMsg reports a change of the live connection.
type connMsg struct {
	State    connState
	Endpoint string
	Node     string    // node id (agent.hello) of Endpoint
	Err      error     // why the connection is down
	Since    time.Time // when it went down
	RetryAt  time.Time // next attempt
}

// eventsMsg is a batch of events from the subscription (at most one batch
// per batchEvery). Resync means events may have been missed: refetch.
type eventsMsg struct {
	Events []rpc.Event
	Resync bool
}

// Live is the connection manager: one connection at a time to one of the
// endpoints, carrying the events.subscribe stream, with failover to the
// next endpoint after a visible countdown. It also serves the Client and
// Prober interfaces: reads go to the endpoint the stream is on (each
// endpoint has its own single-endpoint *rpc.Client), so everything on
// screen comes from the node named in the header. Actions (run verbs,
// replay, queue pause) and workers.list run on the leader: they go to the
// leader's endpoint when it is one of the endpoints (learnt from agent.hello
// at connect and from every Probe), and to the endpoint on screen, whose
// agent forwards them, when it is not, or when the leader's endpoint fails
// them as unavailable.
//
// Concurrency: Run owns the watch connection; the notification callback
// (on the connection's goroutine) appends to buf under mu; the pump
// goroutine drains buf into the program. Client methods read cur, and the
// leader's whereabouts under mu.
type Live struct {
	endpoints []string
	clients   []*rpc.Client
	cur       atomic.Int64
	log       *slog.Logger

	// ReconnectDelay is the countdown after a lost connection (default 2s);
	// BatchEvery bounds how often events reach the program (100ms).
	ReconnectDelay, BatchEvery time.Duration
	// Route is rpc.ClientOptions.Route: "" or rpc.RouteLeader sends actions
	// to the leader's endpoint, rpc.RouteAny to the endpoint on screen.
	Route string

	// dial opens the watch connection (rpc.Dial; tests use in-memory pipes).
	dial func(ctx context.Context, endpoint string, opts rpc.ConnOptions) (*rpc.Conn, error)

	mu sync.Mutex
	// fence is the highest index a write answered (read-your-writes: the
	// next reads wait until the endpoint on screen has applied it);
	// applied is the highest index each endpoint is known to have applied.
	fence   uint64
	applied []uint64
	nodes   []string // node id of each endpoint ("" unknown)
	leader  string   // the leader's node id as last reported ("" unknown)
	seen    bool
	lastIdx uint64
	lastSeq uint32
	buf     []rpc.Event
	resync  bool
	sig     chan struct{}
	lost    chan struct{} // events.lost on the current connection
}

// maxBuffered bounds events waiting for the program; beyond it the oldest
// are dropped and the screens resync.
const maxBuffered = 20000

// Auth is how the TUI's connections authenticate on tcp:// and tls://
// endpoints: rpc.ClientOptions.Token and TLS.
type Auth struct {
	Token string
	TLS   *tls.Config
}

// NewLive returns a manager for endpoints (see rpc.ParseEndpoint),
// authenticating with auth (at most one) where it applies.
func NewLive(endpoints []string, log *slog.Logger, auth ...Auth) (*Live, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("tui: no endpoints")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Live{endpoints: endpoints, log: log, ReconnectDelay: 2 * time.Second, BatchEvery: 100 * time.Millisecond,
		sig: make(chan struct{}, 1), dial: rpc.Dial, nodes: make([]string, len(endpoints)),
		applied: make([]uint64, len(endpoints))}
	var a Auth
	if len(auth) > 0 {
		a = auth[0]
		l.dial = func(ctx context.Context, ep string, o rpc.ConnOptions) (*rpc.Conn, error) {
			return rpc.DialClient(ctx, ep, rpc.ClientOptions{Token: a.Token, TLS: a.TLS, Conn: o})
		}
	}
	for _, ep := range endpoints {
		c, err := rpc.NewClient([]string{ep}, rpc.ClientOptions{MaxAttempts: 2, DialTimeout: time.Second,
			BackoffBase: 50 * time.Millisecond, BackoffCap: 200 * time.Millisecond, Logger: log, Token: a.Token, TLS: a.TLS})
		if err != nil {
			l.Close()
			return nil, err
		}
		l.clients = append(l.clients, c)
	}
	return l, nil
}

// Close closes every client.
func (l *Live) Close() {
	for _, c := range l.clients {
		c.Close()
	}
}

func (l *Live) c() *rpc.Client { return l.clients[l.cur.Load()] }

// learn records what an agent said: its node id (endpoint i) and the
// leader's.
func (l *Live) learn(i int, node, leader string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if node != "" {
		l.nodes[i] = node
	}
	if leader != "" {
		l.leader = leader
	}
}

// leaderClient is the client for a leader-bound call: the leader
// endpoint's, when routing is on and the leader is known to be one of the
// endpoints other than the current one (routed), else the current one.
func (l *Live) leaderClient() (c *rpc.Client, routed bool) {
	cur := int(l.cur.Load())
	if l.Route == rpc.RouteAny || len(l.clients) < 2 {
		return l.clients[cur], false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leader != "" && l.nodes[cur] != l.leader {
		for i, n := range l.nodes {
			if n == l.leader {
				return l.clients[i], true
			}
		}
	}
	return l.clients[cur], false
}

// onLeader makes a leader-bound call (every one the TUI makes is safe to
// repeat) on the leader's endpoint; if that fails as unavailable (the
// leader died or stepped down) it forgets the leader until the next hello
// or probe and repeats the call on the current endpoint, which forwards it.
func onLeader[R any](ctx context.Context, l *Live, call func(*rpc.Client) (R, error)) (R, error) {
	c, routed := l.leaderClient()
	r, err := call(c)
	if routed && errors.Is(err, domain.ErrUnavailable) && ctx.Err() == nil {
		l.mu.Lock()
		l.leader = ""
		l.mu.Unlock()
		r, err = call(l.c())
	}
	if err == nil {
		l.wrote(writeIndex(r))
	}
	return r, err
}

// Read-your-writes. An action goes to the leader's endpoint while reads go
// to the endpoint on screen, often a follower, which may not have applied
// the action's entry yet: a run just replayed would open as "not found".
// The agents fence reads only after writes they forwarded themselves, so
// Live keeps its own fence: the index the last write was answered with.
// A read first waits (up to fenceWait, asking cluster.status every
// fencePoll) until the endpoint on screen has applied it, then reads there
// as usual; once an endpoint is known to have applied the fence, reads go
// straight through.
const (
	fenceWait = 2 * time.Second
	fencePoll = 20 * time.Millisecond
)

// writeIndex is the raft index an action's answer carries (0: none).
func writeIndex(r any) uint64 {
	switch r := r.(type) {
	case *rpc.SubmitResult:
		if r != nil {
			return r.Index
		}
	case *rpc.ChangedResult:
		if r != nil {
			return r.Index
		}
	case *rpc.SignalResult:
		if r != nil {
			return r.Index
		}
	case *rpc.RetryResult:
		if r != nil {
			return r.Index
		}
	case *schedrpc.FireResult:
		if r != nil {
			return r.Index
		}
	}
	return 0
}

// wrote raises the read fence to idx.
func (l *Live) wrote(idx uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence = max(l.fence, idx)
}

// sawApplied records that endpoint i has applied idx.
func (l *Live) sawApplied(i int, idx uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied[i] = max(l.applied[i], idx)
}

// reader is the client for a read: the endpoint on screen's, once it has
// applied the read fence (or fenceWait has passed: the read goes on, and
// at worst shows the state before the write, as before).
func (l *Live) reader(ctx context.Context) *rpc.Client {
	i := int(l.cur.Load())
	c := l.clients[i]
	l.mu.Lock()
	fence, known := l.fence, l.applied[i]
	l.mu.Unlock()
	if known >= fence {
		return c
	}
	wctx, cancel := context.WithTimeout(ctx, fenceWait)
	defer cancel()
	tick := time.NewTicker(fencePoll)
	defer tick.Stop()
	for {
		if st, err := c.ClusterStatus(wctx); err == nil {
			l.sawApplied(i, st.AppliedIndex)
			if st.AppliedIndex >= fence {
				return c
			}
		}
		select {
		case <-wctx.Done():
			l.log.Debug("tui: read fence not reached; reading anyway", "endpoint", l.endpoints[i], "fence", fence)
			return c
		case <-tick.C:
		}
	}
}

// Client methods: reads on the current endpoint's client, leader-bound
// calls through onLeader.

func (l *Live) RunList(ctx context.Context, p rpc.ListParams) (*rpc.ListResult, error) {
	return l.reader(ctx).RunList(ctx, p)
}
func (l *Live) RunGet(ctx context.Context, id string) (*rpc.Run, error) {
	return l.reader(ctx).RunGet(ctx, id)
}
func (l *Live) TaskGet(ctx context.Context, id string) (*rpc.Task, error) {
	return l.reader(ctx).TaskGet(ctx, id)
}
func (l *Live) RunVerb(ctx context.Context, method, id, reason string) (*rpc.ChangedResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.ChangedResult, error) { return c.RunVerb(ctx, method, id, reason) })
}
func (l *Live) RunReplay(ctx context.Context, p rpc.ReplayParams) (*rpc.SubmitResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.SubmitResult, error) { return c.RunReplay(ctx, p) })
}
func (l *Live) RunSubmit(ctx context.Context, p rpc.SubmitParams) (*rpc.SubmitResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.SubmitResult, error) { return c.RunSubmit(ctx, p) })
}
func (l *Live) TaskSignal(ctx context.Context, p rpc.TaskSignalParams) (*rpc.SignalResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.SignalResult, error) { return c.TaskSignal(ctx, p) })
}
func (l *Live) TaskList(ctx context.Context, p rpc.TaskListParams) (*rpc.TaskListResult, error) {
	return l.reader(ctx).TaskList(ctx, p)
}

// RunRetry goes to the leader like the other actions. Repeating it after
// the leader's endpoint failed is safe: a retry that already took effect
// is refused (the run is active again), never applied twice.
func (l *Live) RunRetry(ctx context.Context, p rpc.RetryParams) (*rpc.RetryResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.RetryResult, error) { return c.RunRetry(ctx, p) })
}
func (l *Live) QueueList(ctx context.Context) (*rpc.QueueListResult, error) {
	return l.reader(ctx).QueueList(ctx)
}
func (l *Live) QueuePause(ctx context.Context, name, runID string, pause bool) (*rpc.ChangedResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.ChangedResult, error) { return c.QueuePause(ctx, name, runID, pause) })
}
func (l *Live) WorkersList(ctx context.Context) (*rpc.WorkersResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.WorkersResult, error) { return c.WorkersList(ctx) })
}
func (l *Live) ClusterStatus(ctx context.Context) (*rpc.ClusterStatus, error) {
	return l.c().ClusterStatus(ctx)
}
func (l *Live) ClusterStats(ctx context.Context) (*rpc.ClusterStats, error) {
	return l.c().ClusterStats(ctx)
}
func (l *Live) EventsList(ctx context.Context, p rpc.EventsListParams) (*rpc.EventsListResult, error) {
	return l.reader(ctx).EventsList(ctx, p)
}
func (l *Live) TaskLogs(ctx context.Context, p rpc.TaskLogsParams) (*rpc.TaskLogsResult, error) {
	return l.reader(ctx).TaskLogs(ctx, p)
}

// Schedule calls: the list on the current endpoint, the actions on the
// leader (pause, resume and delete repeat safely by state, a trigger by
// its run id).

func (l *Live) Schedules(ctx context.Context) (*schedrpc.ListResult, error) {
	return schedrpc.List(ctx, l.reader(ctx))
}
func (l *Live) SchedulePause(ctx context.Context, id string, pause bool) (*rpc.ChangedResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.ChangedResult, error) {
		return schedrpc.Pause(ctx, c, id, "via flowd tui", pause)
	})
}
func (l *Live) ScheduleTrigger(ctx context.Context, id, runID string) (*schedrpc.FireResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*schedrpc.FireResult, error) {
		return schedrpc.Trigger(ctx, c, schedrpc.TriggerParams{ID: id, RunID: runID})
	})
}
func (l *Live) ScheduleDelete(ctx context.Context, id string) (*rpc.ChangedResult, error) {
	return onLeader(ctx, l, func(c *rpc.Client) (*rpc.ChangedResult, error) { return schedrpc.Delete(ctx, c, id) })
}

// Probe asks every endpoint for cluster.status in parallel.
func (l *Live) Probe(ctx context.Context) []NodeStatus {
	out := make([]NodeStatus, len(l.endpoints))
	var wg sync.WaitGroup
	for i, ep := range l.endpoints {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
			defer cancel()
			t0 := time.Now()
			st, err := l.clients[i].ClusterStatus(pctx)
			out[i] = NodeStatus{Endpoint: ep, Err: err, RTT: time.Since(t0)}
			if err == nil {
				out[i].Status = st
			}
		})
	}
	wg.Wait()
	// Who leads: the node that says it does, else what the node on screen
	// believes.
	leader := ""
	for i, ns := range out {
		if ns.Status == nil {
			continue
		}
		l.learn(i, ns.Status.NodeID, "")
		l.sawApplied(i, ns.Status.AppliedIndex)
		if ns.Status.State == "leader" {
			leader = ns.Status.NodeID
		} else if leader == "" && i == int(l.cur.Load()) {
			leader = ns.Status.LeaderID
		}
	}
	if leader != "" {
		l.mu.Lock()
		l.leader = leader
		l.mu.Unlock()
	}
	return out
}

// Run keeps a subscription alive until ctx ends, reporting connMsg and
// eventsMsg through send (tea.Program.Send). After a lost connection it
// counts down ReconnectDelay, then tries the next endpoint; when a whole
// round of endpoints fails it backs off (up to 10s) with a countdown.
func (l *Live) Run(ctx context.Context, send func(tea.Msg)) {
	go l.pump(ctx, send)
	i, fails := 0, 0
	for ctx.Err() == nil {
		ep := l.endpoints[i]
		send(connMsg{State: connConnecting, Endpoint: ep})
		conn, hello, err := l.connect(ctx, ep)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			d := 200 * time.Millisecond
			if fails%len(l.endpoints) == 0 {
				d = min(10*time.Second, time.Second<<min(fails/len(l.endpoints)-1, 4))
			}
			now := time.Now()
			send(connMsg{State: connDown, Endpoint: ep, Err: err, Since: now, RetryAt: now.Add(d)})
			l.log.Debug("tui: connect failed", "endpoint", ep, "err", err)
			sleepCtx(ctx, d)
			i = (i + 1) % len(l.endpoints)
			continue
		}
		fails = 0
		node := hello.NodeID
		l.learn(i, node, hello.LeaderID)
		l.cur.Store(int64(i))
		send(connMsg{State: connLive, Endpoint: ep, Node: node})
		l.watch(ctx, conn)
		conn.Close()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		send(connMsg{State: connDown, Endpoint: ep, Node: node, Err: conn.Err(), Since: now, RetryAt: now.Add(l.ReconnectDelay)})
		sleepCtx(ctx, l.ReconnectDelay)
		i = (i + 1) % len(l.endpoints)
	}
}

// watch blocks while conn is alive, re-subscribing if the stream fell
// behind the retained window (events.lost).
func (l *Live) watch(ctx context.Context, conn *rpc.Conn) {
	for {
		select {
		case <-conn.Done():
			return
		case <-ctx.Done():
			return
		case <-l.lostCh():
			l.mu.Lock()
			l.seen, l.resync = false, true
			l.mu.Unlock()
			l.signal()
			if err := l.subscribe(ctx, conn); err != nil {
				conn.Close()
				return
			}
		}
	}
}

func (l *Live) lostCh() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// connect dials ep, says hello and subscribes.
func (l *Live) connect(ctx context.Context, ep string) (*rpc.Conn, rpc.HelloResult, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l.mu.Lock()
	l.lost = make(chan struct{}, 1)
	l.mu.Unlock()
	var hello rpc.HelloResult
	conn, err := l.dial(dctx, ep, rpc.ConnOptions{Logger: l.log, OnNotify: l.onNotify})
	if err != nil {
		return nil, hello, err
	}
	if err := conn.Call(dctx, rpc.MethodHello, rpc.HelloParams{ProtocolVersion: rpc.ProtocolVersion, Client: "flowd-tui"}, &hello); err != nil {
		conn.Close()
		return nil, hello, err
	}
	if hello.ProtocolVersion != rpc.ProtocolVersion {
		conn.Close()
		return nil, hello, fmt.Errorf("agent %s speaks protocol %d, this TUI %d: upgrade the older side", hello.NodeID, hello.ProtocolVersion, rpc.ProtocolVersion)
	}
	if err := l.subscribe(dctx, conn); err != nil {
		conn.Close()
		return nil, hello, err
	}
	return conn, hello, nil
}

// subscribe starts the stream where the last one stopped: from the last
// index seen (not +1: an index may carry several events, told apart by
// seq; duplicates are dropped in onNotify). If that index is no longer
// retained, it starts from now and flags a resync.
func (l *Live) subscribe(ctx context.Context, conn *rpc.Conn) error {
	l.mu.Lock()
	p := rpc.SubscribeParams{}
	if l.seen {
		p.FromIndex = l.lastIdx
	}
	l.mu.Unlock()
	var res rpc.SubscribeResult
	err := conn.Call(ctx, rpc.MethodEventsSubscribe, p, &res)
	var pe *rpc.Error
	if p.FromIndex > 0 && errors.As(err, &pe) && pe.Code == rpc.CodeNotFound {
		l.mu.Lock()
		l.seen, l.resync = false, true
		l.mu.Unlock()
		l.signal()
		err = conn.Call(ctx, rpc.MethodEventsSubscribe, rpc.SubscribeParams{}, &res)
	}
	return err
}

// onNotify runs on the connection's goroutine: dedupe, buffer, signal.
func (l *Live) onNotify(method string, params json.RawMessage) {
	switch method {
	case rpc.NotifyEvent:
		var ev rpc.Event
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		l.mu.Lock()
		if l.seen && (ev.Index < l.lastIdx || (ev.Index == l.lastIdx && ev.Seq <= l.lastSeq)) {
			l.mu.Unlock()
			return
		}
		l.seen, l.lastIdx, l.lastSeq = true, ev.Index, ev.Seq
		l.buf = append(l.buf, ev)
		if len(l.buf) > maxBuffered {
			l.buf = append(l.buf[:0], l.buf[len(l.buf)-maxBuffered/2:]...)
			l.resync = true
		}
		l.mu.Unlock()
		l.signal()
	case "events.lost":
		select {
		case l.lostCh() <- struct{}{}:
		default:
		}
	}
}

func (l *Live) signal() {
	select {
	case l.sig <- struct{}{}:
	default:
	}
}

// pump hands buffered events to the program, at most one batch per
// BatchEvery: this is what bounds redraws under a busy stream.
func (l *Live) pump(ctx context.Context, send func(tea.Msg)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.sig:
		}
		l.mu.Lock()
		msg := eventsMsg{Events: l.buf, Resync: l.resync}
		l.buf, l.resync = nil, false
		l.mu.Unlock()
		if len(msg.Events) > 0 || msg.Resync {
			send(msg)
		}
		sleepCtx(ctx, l.BatchEvery)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
