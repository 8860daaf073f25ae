package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Leader forwarding. Writes (and long polls, and consistent reads) must run
// on the leader. A follower sends the same method and params to the
// leader's forwarding listener, whose address the leader published in the
// replicated state (fsm.NodeInfo) when it took office; until that record
// exists the address is derived from the leader's raft address. A request
// that arrives over the forwarding listener is served there or fails; it is
// never forwarded again, so a stale view of who leads cannot loop.
//
// leaderProxy is that layer (rqlite's proxy.Proxy): it depends only on the
// node's leadership and the applied index (the seam, seam.go), holds the
// connections to leaders, and keeps the agent's read fence. onLeader is its
// entry point. Its methods are safe for concurrent use.
type leaderProxy struct {
	self  string // this node's id
	node  leadership
	state interface{ AppliedIndex() uint64 }
	log   *slog.Logger

	// readFence is the highest index of a forwarded write this agent has
	// answered; local reads wait until it is applied (read-your-writes on
	// one agent without holding the write's answer back).
	readFence atomic.Uint64

	mu    sync.Mutex
	conns map[string]*rpc.Conn
	dials map[string]*sync.Mutex // one dial per address at a time
	idle  map[string][]*rpc.Conn // spare connections for exclusive calls
	// published caches the forwarding address a leader published (reading
	// it from the state store costs a store transaction per forward); it is
	// dropped when a forward to it fails.
	published map[string]string
	// dial reaches a leader's forwarding port (nil: plain TCP; tls.go).
	dial forwardDialer
}

func newLeaderProxy(self string, node leadership, state interface{ AppliedIndex() uint64 }, log *slog.Logger) *leaderProxy {
	return &leaderProxy{self: self, node: node, state: state, log: log, conns: map[string]*rpc.Conn{},
		dials: map[string]*sync.Mutex{}, idle: map[string][]*rpc.Conn{}, published: map[string]string{}}
}

// leaderAddr returns the leader's id and forwarding address.
func (f *leaderProxy) leaderAddr() (string, string) {
	id, raftAddr := f.node.Leader()
	if id == "" {
		return "", ""
	}
	f.mu.Lock()
	addr, ok := f.published[id]
	f.mu.Unlock()
	if ok {
		return id, addr
	}
	if meta := f.node.NodeMeta(id); meta["forward"] != "" {
		f.mu.Lock()
		f.published[id] = meta["forward"]
		f.mu.Unlock()
		return id, meta["forward"]
	}
	addr, _ = DeriveForwardAddr(raftAddr)
	return id, addr
}

// forget drops the cached published address of node id.
func (f *leaderProxy) forget(id string) {
	f.mu.Lock()
	delete(f.published, id)
	f.mu.Unlock()
}

func (f *leaderProxy) live(addr string) *rpc.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.conns[addr]; c != nil {
		select {
		case <-c.Done():
		default:
			return c
		}
	}
	return nil
}

// conn returns the pooled connection to addr, dialing it if needed. Dials
// to one address are serialized, so concurrent forwards share one
// connection instead of closing each other's.
func (f *leaderProxy) conn(ctx context.Context, addr string) (*rpc.Conn, error) {
	if c := f.live(addr); c != nil {
		return c, nil
	}
	f.mu.Lock()
	dm := f.dials[addr]
	if dm == nil {
		dm = &sync.Mutex{}
		f.dials[addr] = dm
	}
	f.mu.Unlock()
	dm.Lock()
	defer dm.Unlock()
	if c := f.live(addr); c != nil {
		return c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := f.dialLeader(dctx, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.conns[addr] = c
	f.mu.Unlock()
	return c, nil
}

func (f *leaderProxy) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	for _, cs := range f.idle {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	f.conns = map[string]*rpc.Conn{}
	f.idle = map[string][]*rpc.Conn{}
}

type exclusiveKey struct{}

// withExclusiveForward asks onLeader to forward on a connection of the
// call's own (see callExclusive): for long polls held on a client's behalf.
func withExclusiveForward(ctx context.Context) context.Context {
	return context.WithValue(ctx, exclusiveKey{}, true)
}

func exclusiveForward(ctx context.Context) bool { return ctx.Value(exclusiveKey{}) != nil }

// maxIdleExclusive bounds the spare connections kept per leader.
const maxIdleExclusive = 32

// callExclusive makes a long-poll call on a connection of its own. If the
// caller gives up (its client went away or half-closed), the connection is
// half-closed, which the leader sees as the end of its input: it stops
// holding the claim and answers with what it leased in that instant, and
// that answer is returned (so a worker that half-closed gets those tasks
// instead of their leases going to nobody). The answer is awaited until
// the call's deadline at most.
func (f *leaderProxy) callExclusive(ctx, epoch context.Context, addr string, env, out any) error {
	f.mu.Lock()
	var c *rpc.Conn
	for len(f.idle[addr]) > 0 && c == nil {
		n := len(f.idle[addr]) - 1
		c = f.idle[addr][n]
		f.idle[addr] = f.idle[addr][:n]
		select {
		case <-c.Done():
			c = nil
		default:
		}
	}
	f.mu.Unlock()
	if c == nil {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var err error
		c, err = f.dialLeader(dctx, addr)
		cancel()
		if err != nil {
			return err
		}
	}
	cctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(cctx, d)
	}
	defer cancel()
	half := context.AfterFunc(ctx, c.CloseWrite)
	// Leadership moved: drop the call and close its connection (its claim
	// is re-sent, with its request id, to the new leader, which answers
	// any lease it granted).
	err := c.CallUntil(cctx, epoch.Done(), methodForward, env, out)
	if !half() || epoch.Err() != nil { // half-closed, or leadership moved
		_ = c.Close()
		return err
	}
	f.mu.Lock()
	if len(f.idle[addr]) < maxIdleExclusive {
		f.idle[addr] = append(f.idle[addr], c)
		c = nil
	}
	f.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	return err
}

// methodForward is the forwarding port's envelope: a forwarded call with
// its caller's deadline (forwardCall). The leader refuses one whose
// deadline has passed instead of executing it after the caller was
// answered (a request can sit in a socket buffer while the network is cut
// or the leader is stopped).
const methodForward = "agent.forward"

// forwardEnvelope is the envelope's params: a follower sends it with its
// caller's params as they are (forwardCall), the leader reads them as raw
// JSON for the handler (serveForwarded).
type forwardEnvelope[P any] struct {
	Method string `json:"method"`
	Params P      `json:"params,omitempty"`
	// DeadlineMS is the caller's deadline in Unix ms (0: none). Node clocks
	// must agree to well within a request's budget (10 s for writes).
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	// For is the client the follower served, with the roles it checked:
	// the leader checks them again and audits the call as theirs.
	For *forwardOrigin `json:"for,omitempty"`
}

// forwardCall is the envelope as a follower sends it.
type forwardCall = forwardEnvelope[any]

// forwardOrigin is rpc.Caller on the wire.
type forwardOrigin struct {
	UID   int      `json:"uid"`
	GID   int      `json:"gid"`
	PID   int      `json:"pid"`
	Addr  string   `json:"addr,omitempty"`
	Roles rpc.Role `json:"roles"`
	// Token is the ACL token id a TCP client authenticated with.
	Token     string `json:"token,omitempty"`
	TokenName string `json:"token_name,omitempty"`
}

func originOf(ctx context.Context) *forwardOrigin {
	c, ok := rpc.CallerOf(ctx)
	if !ok {
		return nil // an agent's own call (no client)
	}
	return &forwardOrigin{UID: c.UID, GID: c.GID, PID: c.PID, Addr: c.Addr, Roles: c.Roles, Token: c.Token, TokenName: c.TokenName}
}

// forward sends one forwarded call to the leader at addr. It gives up at
// once when leadership changes (epoch ends): the caller re-routes.
//
// params that are json.RawMessage (asSent) go out as they are, inside an
// envelope appended around them (forward_raw.go).
func (f *leaderProxy) forward(ctx, epoch context.Context, addr, method string, params, out any) error {
	var deadlineMS int64
	if d, ok := ctx.Deadline(); ok {
		deadlineMS = d.UnixMilli()
	}
	var env any = forwardCall{Method: method, Params: params, For: originOf(ctx), DeadlineMS: deadlineMS}
	if raw, ok := params.(json.RawMessage); ok {
		b, err := rawEnvelope(method, raw, deadlineMS, originOf(ctx))
		if err != nil {
			return err
		}
		env = b
	}
	if exclusiveForward(ctx) {
		return f.callExclusive(ctx, epoch, addr, env, out)
	}
	c, err := f.conn(ctx, addr)
	if err != nil {
		return err
	}
	return c.CallUntil(ctx, epoch.Done(), methodForward, env, out)
}

// onLeader runs local when this node leads; otherwise it forwards method
// with params to the leader through p, retrying across elections until ctx
// ends. It returns a retryable -32004 error if no leader could be reached
// in time. (A function, not a method: Go methods take no type parameters.)
func onLeader[R any](ctx context.Context, p *leaderProxy, method string, params any, local func(context.Context) (R, error)) (R, error) {
	var zero R
	lostMidCall := false // a forward was out when leadership changed
	for {
		if p.node.IsLeader() || isForwarded(ctx) {
			// A new leader first applies what earlier terms committed, so
			// what it reads reflects every acknowledged write.
			err := p.node.WaitLeaderReady(ctx)
			if err == nil {
				var r R
				if r, err = local(ctx); err == nil || isForwarded(ctx) || !errors.Is(err, cluster.ErrNotLeader) {
					return r, err
				}
			} else if isForwarded(ctx) {
				return zero, err
			}
		}
		epoch := p.node.LeaderEpoch() // before reading who leads
		id, addr := p.leaderAddr()
		switch {
		case id == p.self:
			// We lead according to raft but local said no: leadership is
			// changing. Wait for it to settle.
		case id == "" || addr == "":
			if lostMidCall && exclusiveForward(ctx) {
				// A long poll (a claim) whose leader was lost while it was
				// out: the leader may have leased tasks to it whose answer
				// cannot reach us. Say so now rather than at the end of
				// the wait, so the worker re-sends its request id through
				// an agent that reaches the leader while those leases hold
				// (a cut-off agent learns of the loss within a heartbeat
				// timeout; a wait can be 30 s, a lease 1.5 s).
				return zero, &domain.UnavailableError{Reason: "this agent lost the leader while the " + method +
					" was out; its outcome is unknown: re-send it (same request id) through another agent", RetryAfter: 50 * time.Millisecond}
			}
		default:
			// A relayed call (forward_raw.go) takes the leader's answer as
			// bytes: its fence is read from them, and its handler returns
			// them to its client as they are.
			var out R
			var raw json.RawMessage
			dst := any(&out)
			rl := relayOf(ctx, method)
			if rl != nil {
				dst = &raw
			}
			err := p.forward(ctx, epoch, addr, method, params, dst)
			if err == nil {
				if rl != nil {
					p.raiseFenceTo(writeIndexOf[R](raw))
					rl.result = raw
					return out, nil
				}
				p.raiseFence(out)
				return out, nil
			}
			if epoch.Err() != nil && ctx.Err() == nil {
				// Leadership changed while the request was out: send it to
				// whoever leads now, at once (every forwarded method is
				// repeat-safe: by id, nonce, request id or fencing token).
				p.log.Debug("leadership changed during a forward; re-routing", "method", method, "from", id)
				lostMidCall = true
				continue
			}
			if !errors.Is(err, domain.ErrUnavailable) && !errors.Is(err, rpc.ErrClosed) {
				return zero, err // a real answer from the leader
			}
			p.forget(id)
			p.log.Debug("forward failed; retrying", "method", method, "leader", id, "addr", addr, "err", err)
		}
		if ctx.Err() != nil {
			return zero, p.unavailable(ctx.Err())
		}
		p.node.WaitLeaderChange(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return zero, p.unavailable(ctx.Err())
		}
	}
}

func (f *leaderProxy) unavailable(cause error) error {
	id, _ := f.node.Leader()
	reason := "no leader reachable in time (" + cause.Error() + ")"
	if id == "" {
		n := len(f.node.Servers())
		reason = "no leader yet: an election is in progress or fewer than a majority of the " +
			itoa(n) + " nodes are up; start the others or run `flowd operator raft list-peers`"
	}
	return &domain.UnavailableError{Reason: reason, RetryAfter: 300 * time.Millisecond}
}

// raiseFence records the index of a forwarded write as the agent's read
// fence: the answer goes back at once, and the next local read on this
// agent (from any connection) first waits until that index is applied
// here (see awaitReadFence), so a client reads its own writes.
func (f *leaderProxy) raiseFence(out any) {
	if wi, ok := out.(interface{ WriteIndex() uint64 }); ok {
		f.raiseFenceTo(wi.WriteIndex())
	}
}

// raiseFenceTo raises the read fence to idx (0: no write).
func (f *leaderProxy) raiseFenceTo(idx uint64) {
	if idx == 0 {
		return
	}
	for {
		cur := f.readFence.Load()
		if cur >= idx || f.readFence.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// readFenceWait bounds how long a read waits for the fence; past it the
// read is served from what is applied (the follower is far behind).
const readFenceWait = time.Second

// awaitReadFence waits (briefly) until this agent applied every forwarded
// write it has answered.
func (f *leaderProxy) awaitReadFence(ctx context.Context) {
	idx := f.readFence.Load()
	if idx == 0 || f.state.AppliedIndex() >= idx {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, readFenceWait)
	defer cancel()
	_ = f.node.WaitForApplied(ctx, idx)
}

// fenced makes a local read wait for the read fence first.
func (a *Agent) fenced(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, params json.RawMessage) (any, error) {
		a.proxy.awaitReadFence(ctx)
		return h(ctx, params)
	}
}

// serveForwarded answers methodForward on the forwarding port: the method
// it wraps (one of methods, the forwarded subset), under the caller's
// deadline, or -32004 without executing it when that deadline has passed.
func serveForwarded(methods map[string]rpc.Handler) rpc.Handler {
	return rpc.Func(func(ctx context.Context, env forwardEnvelope[json.RawMessage]) (any, error) {
		h, ok := methods[env.Method]
		if !ok {
			return nil, rpc.Errorf(rpc.CodeMethodNotFound, "the forwarding port does not serve %q", env.Method)
		}
		if o := env.For; o != nil {
			c := rpc.Caller{UID: o.UID, GID: o.GID, PID: o.PID, Addr: o.Addr, Roles: o.Roles, Token: o.Token, TokenName: o.TokenName}
			if c.Roles&rpc.MethodRoles(env.Method) == 0 {
				return nil, rpc.Denied(c, env.Method) // the follower checked too
			}
			ctx = rpc.WithOrigin(ctx, c)
		}
		if env.DeadlineMS > 0 {
			d := time.UnixMilli(env.DeadlineMS)
			if !time.Now().Before(d) {
				return nil, &domain.UnavailableError{RetryAfter: 250 * time.Millisecond,
					Reason: "the forwarded " + env.Method + " reached the leader after its caller's deadline; it was not executed"}
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
		}
		return h(ctx, env.Params)
	})
}

// onNode runs local when node is this agent ("" too, or the call was
// forwarded here); otherwise it forwards method with params to node's
// forwarding listener, once: for calls addressed to one agent (snapshot
// transfers), which fail rather than run elsewhere.
func onNode[R any](ctx context.Context, p *leaderProxy, node, method string, params any, local func(context.Context) (R, error)) (R, error) {
	var zero R
	if node == "" || node == p.self {
		return local(ctx)
	}
	if isForwarded(ctx) {
		return zero, &domain.UnavailableError{RetryAfter: time.Second,
			Reason: "a " + method + " for " + node + " reached " + p.self + ": the members' addresses changed; retry"}
	}
	addr := p.nodeAddr(ctx, node)
	if addr == "" {
		return zero, fmt.Errorf("%w: no member %q; run `flowd operator raft list-peers`", domain.ErrNotFound, node)
	}
	var out R
	if err := p.forward(ctx, context.Background(), addr, method, params, &out); err != nil {
		return zero, err
	}
	return out, nil
}

// nodeAddr returns node id's forwarding address: the one it published
// (publish.go; waited for briefly: a member publishes it within moments of
// a leader's election), or else the one derived from its raft address; ""
// if it is not a member.
func (f *leaderProxy) nodeAddr(ctx context.Context, id string) string {
	wait := time.NewTimer(publishWait)
	defer wait.Stop()
	for {
		if meta := f.node.NodeMeta(id); meta["forward"] != "" {
			return meta["forward"]
		}
		member := ""
		for _, s := range f.node.Servers() {
			if s.ID == id {
				member = s.Address
			}
		}
		if member == "" {
			return ""
		}
		select {
		case <-ctx.Done():
		case <-wait.C:
		case <-time.After(50 * time.Millisecond): // the record is replicated state; poll it
			continue
		}
		addr, _ := DeriveForwardAddr(member)
		return addr
	}
}

// publishWait bounds nodeAddr's wait for a member's published address.
const publishWait = 3 * time.Second
