package rpc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ClientOptions configure a Client. The zero value is usable.
type ClientOptions struct {
	// BackoffBase and BackoffCap shape the delay before a retry: full jitter,
	// uniform in [0, min(BackoffCap, BackoffBase*2^attempt)) (defaults 50ms
	// and 5s). A CodeUnavailable retry waits at least its retry_after_ms.
	BackoffBase, BackoffCap time.Duration
	// MaxAttempts bounds the tries of one call, the first included
	// (default 8). ctx bounds them in time.
	MaxAttempts int
	// DialTimeout bounds one connection attempt (default 2s), and one
	// agent.hello the client makes to learn who leads.
	DialTimeout time.Duration
	// Route says where leader-bound calls (see LeaderBound: writes, claims,
	// long polls) and reads of the replicated state go. RouteLeader (the
	// default, ""): straight to the leader's endpoint, on a connection of
	// its own, when the leader is among the endpoints and reachable (a read
	// there sees every write acknowledged to any client); otherwise to the
	// current connection, whose agent forwards them. RouteAny: always the current
	// connection (the behaviour before leader routing), which moves to the
	// next endpoint when its agent fails or answers -32004. With one
	// endpoint the two are the same.
	Route string
	// LeaderCheck is how often, at most, the client asks the agent it sends
	// leader-bound calls to whether it still leads (agent.hello, in the
	// background, only while such calls are made): default 5s, negative
	// never. A lost connection or a -32004 answer re-learns the leader at
	// once, whatever this says.
	LeaderCheck time.Duration
	// OnConnect, if set, is called (on its own goroutine) after each new
	// current connection (the one reads and subscriptions use), e.g. to
	// subscribe again: subscriptions are per connection. The connection
	// kept for leader-bound calls does not count.
	OnConnect func(endpoint string)
	// Conn configures each connection; its OnNotify is ignored (use
	// Client.OnNotify).
	Conn ConnOptions
	// Token is an ACL token's secret (acl.go): sent as agent.auth first on
	// every TCP connection. Unix socket callers need none.
	Token string
	// TLS, if set, is used for tcp:// endpoints (tls:// endpoints always
	// use TLS, with this config or the system roots); see ClientTLSConfig.
	TLS *tls.Config
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// FailFast makes a call give up early, with a *ReachError (reach.go),
	// when the cluster cannot serve it: no endpoint accepts a connection
	// (ErrNoAgent) or a TLS handshake fails (ErrTLS), at once, instead of
	// retrying until ctx ends; and a leader-bound call fails with
	// ErrNoQuorum once a Survey finds the reachable agents leaderless with
	// no majority reachable (or leaderless for longer than elections take).
	// The survey runs before such a call is sent when the client already
	// knows of no leader, after a failed try, and while a leader-bound call
	// is out for longer than QuorumCheck (default 250ms), then every 500ms.
	// For interactive tools (the CLI); a worker leaves it off and waits.
	FailFast    bool
	QuorumCheck time.Duration
}

// Route values of ClientOptions.
const (
	RouteLeader = "leader" // leader-bound calls straight to the leader (default)
	RouteAny    = "any"    // every call on the current connection
)

// Client calls any of several endpoints (the agents of one cluster) over one
// current connection at a time, failing over on connection errors. It is
// safe for concurrent use; concurrent calls share the connection.
//
// Leader routing (ClientOptions.Route, default RouteLeader, with more than
// one endpoint): leader-bound calls go to the leader's endpoint over a
// second connection (the same one when the current endpoint is the
// leader's). The client learns node ids and the leader's id with
// agent.hello, dialling the endpoints lazily, and re-learns them when that
// connection fails, when it answers -32004, and every LeaderCheck. When the
// leader is not among the endpoints or cannot be reached, leader-bound calls
// use the current connection and the agent forwards them (re-learning is
// retried with backoff). Reads use the current connection; one that follows
// a write this client made through the leader goes to the leader when the
// current agent has not applied that write yet, so a client reads its own
// writes as it did when its agent forwarded them.
//
// Retry policy: a connection error (*ConnError: dial failed, connection
// lost) moves on (the current connection to the next endpoint, a leader
// connection back to learning who leads), and the call is retried if it was
// not sent or if the caller marked it safe to send again (CallIdempotent,
// CallResendable). A CodeUnavailable answer (no leader yet) is retried
// after its retry_after_ms, for CallIdempotent calls only; when it came over
// the current connection and there are other endpoints, that connection is
// dropped first (its agent reached no leader: it may be cut off from the
// majority), so the retry or the next call tries the next endpoint. Other
// protocol errors (-32001 not_found, ...) are returned at once.
type Client struct {
	endpoints []string
	opts      ClientOptions
	log       *slog.Logger
	notify    atomic.Pointer[func(string, json.RawMessage)]
	dialSlot  chan struct{} // one dial at a time
	routing   bool          // leader routing is on (see route.go)
	learnSlot chan struct{} // one leader discovery at a time
	checking  atomic.Bool   // a periodic leader check is running
	unknown   ClaimMemo     // claims whose outcome is unknown, re-sent by the next Claim (methods.go)

	mu     sync.Mutex
	idx    int   // current endpoint
	conn   *Conn // current connection, nil if none
	closed bool
	r      routeState
}

// NewClient returns a client for the endpoints (see ParseEndpoint); it
// connects on the first call.
func NewClient(endpoints []string, opts ClientOptions) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("rpc: no endpoints")
	}
	for _, ep := range endpoints {
		if _, _, err := parseClientEndpoint(ep); err != nil {
			return nil, err
		}
	}
	if opts.BackoffBase <= 0 {
		opts.BackoffBase = 50 * time.Millisecond
	}
	if opts.BackoffCap <= 0 {
		opts.BackoffCap = 5 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.QuorumCheck <= 0 {
		opts.QuorumCheck = 250 * time.Millisecond
	}
	switch opts.Route {
	case "", RouteLeader:
		opts.Route = RouteLeader
	case RouteAny:
	default:
		return nil, fmt.Errorf("rpc: route %q: want %q or %q", opts.Route, RouteLeader, RouteAny)
	}
	switch {
	case opts.LeaderCheck == 0:
		opts.LeaderCheck = 5 * time.Second
	case opts.LeaderCheck < 0:
		opts.LeaderCheck = 0
	}
	c := &Client{endpoints: append([]string(nil), endpoints...), opts: opts, log: opts.Logger, dialSlot: make(chan struct{}, 1),
		routing: opts.Route == RouteLeader && len(endpoints) > 1, learnSlot: make(chan struct{}, 1),
		r: routeState{nodes: map[string]string{}, retired: map[*leaderLink]struct{}{}}}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.opts.Conn.Logger = c.log
	c.opts.Conn.OnNotify = func(method string, params json.RawMessage) {
		if f := c.notify.Load(); f != nil {
			(*f)(method, params)
		}
	}
	return c, nil
}

// OnNotify sets the function that receives server notifications from every
// connection the client makes, before and after reconnects (nil: drop them).
// See ConnOptions.OnNotify for the calling contract.
func (c *Client) OnNotify(fn func(method string, params json.RawMessage)) {
	if fn == nil {
		c.notify.Store(nil)
		return
	}
	c.notify.Store(&fn)
}

// Endpoint returns the endpoint of the current connection (or the one to
// be tried next); see Leader for leader-bound calls.
func (c *Client) Endpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endpoints[c.idx]
}

// Close closes the connection; calls in progress and later fail with
// ErrClosed.
func (c *Client) Close() error {
	for _, conn := range c.shut(true) {
		conn.Close()
	}
	return nil
}

// shut marks the client closed and returns its connections; forget drops
// them from the client too.
func (c *Client) shut(forget bool) []*Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var conns []*Conn
	if c.conn != nil {
		conns = append(conns, c.conn)
	}
	if l := c.r.lead; l != nil && l.conn != nil {
		conns = append(conns, l.conn)
	}
	for l := range c.r.retired {
		if l.conn != nil {
			conns = append(conns, l.conn)
		}
	}
	if forget {
		c.conn, c.r.lead = nil, nil
		clear(c.r.retired)
	}
	return conns
}

// Call calls method once; it is retried only if the request was certainly
// not sent. Errors are as for Conn.Call.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, retryUnsent)
}

// CallIdempotent calls a method that is safe to repeat (a read, or a write
// made idempotent by a client-chosen id), retrying it across connection
// losses and CodeUnavailable answers.
func (c *Client) CallIdempotent(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, retryAll)
}

// CallResendable calls a method that is safe to send again after a lost
// answer (a claim with its request id) but whose -32004 answer is its
// caller's to handle (a long poll that found no leader in time): it is
// retried across connection losses only.
func (c *Client) CallResendable(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, retryLost)
}

// retryPolicy says which failures call retries.
type retryPolicy uint8

const (
	retryUnsent retryPolicy = iota // only a request certainly not sent
	retryLost                      // also one sent on a connection that was lost
	retryAll                       // also a CodeUnavailable answer
)

func (c *Client) call(ctx context.Context, method string, params, result any, policy retryPolicy) error {
	class := classify(method, params)
	if !c.opts.FailFast || class != routeLeader || method == MethodRunWait || method == MethodTaskClaim {
		// Long polls are answered by their wait (-32004 without a leader),
		// and a failed try is checked in attempts: no watch needed.
		return c.attempts(ctx, method, params, result, policy, class)
	}
	return c.watched(ctx, method, params, result, policy, class)
}

func (c *Client) attempts(ctx context.Context, method string, params, result any, policy retryPolicy, class routeClass) error {
	var err, prev error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt >= c.opts.MaxAttempts {
				return err
			}
			if werr := sleep(ctx, c.delay(attempt, err)); werr != nil {
				return fmt.Errorf("%w (last error: %w)", werr, err)
			}
		}
		var conn *Conn
		var link *leaderLink // set when the call goes over a leader connection
		stuck := false
		if conn, link, err = c.pick(ctx, class); err == nil && link == nil && c.opts.FailFast && class == routeLeader && c.leaderUnknown() {
			// No agent knew a leader when the client asked: look before
			// sending a write the agent would hold until a leader appears.
			if v := c.verdict(ctx, class); v != nil {
				return v
			}
		}
		if err == nil {
			actx, cancel := ctx, context.CancelFunc(func() {})
			if limit := patience(method, params); limit > 0 {
				actx, cancel = context.WithTimeout(ctx, limit)
			}
			err = conn.Call(actx, method, params, result)
			stuck = err != nil && actx.Err() != nil && ctx.Err() == nil
			cancel()
			c.release(link)
			if err == nil {
				c.observe(conn, link, method, result)
				return nil
			}
		}
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			if prev != nil && !errors.Is(err, prev) {
				// The deadline came while dialing again: say why the
				// earlier tries failed (no agent listening, say), not only
				// that time ran out.
				return fmt.Errorf("%w (last error: %w)", err, prev)
			}
			return err
		}
		if re, ok := errors.AsType[*ReachError](err); ok && c.opts.FailFast {
			return re // nothing to retry against
		}
		prev = err
		if stuck {
			// The agent held a long poll well past its wait: it is stopped
			// or wedged. Leave it, as after a lost connection.
			c.drop(conn)
			if policy == retryUnsent {
				return err
			}
			c.log.Debug("rpc: no answer within the call's patience; failing over", "method", method, "next", c.Endpoint())
			continue
		}
		var ce *ConnError
		var pe *Error
		switch {
		case errors.As(err, &ce):
			c.drop(conn)
			if c.opts.FailFast {
				if v := c.verdict(ctx, class); v != nil {
					return v
				}
			}
			if policy == retryUnsent && !ce.NotSent {
				return err
			}
			c.log.Debug("rpc: connection error; failing over", "method", method, "err", err, "next", c.Endpoint())
		case errors.As(err, &pe) && pe.Code == CodeUnavailable:
			if link != nil {
				c.suspect(link) // is it still the leader? asked before its next use
			} else if len(c.endpoints) > 1 {
				// The current agent reached no leader (cut off from the
				// majority, or in an election): the retry, or the next
				// call, tries the next endpoint. A worker pinned to an agent
				// that a partition cut off would otherwise re-send its
				// claim there until the leases it was granted expired.
				c.drop(conn)
			}
			if c.opts.FailFast {
				if v := c.verdict(ctx, class); v != nil {
					return v
				}
			}
			if policy != retryAll {
				return err
			}
			c.log.Debug("rpc: unavailable; retrying", "method", method, "err", err)
		default:
			return err
		}
	}
}

// claimPatience is how long past its wait a task.claim may go unanswered
// before the client takes its agent for stuck (an agent answers by the
// wait plus its 500 ms margin for a claim entry in flight). It is short
// because a lease granted just before its leader froze waits for the
// re-send: the new leader renews it for one lease period from its term's
// start (fsm/apply_term.go), and the re-send must arrive inside that
// period; with 2 s, a 1.5 s lease sometimes expired first. Leaving a slow
// but healthy agent early costs a reconnect, nothing more: the re-sent
// claim carries the same request id.
const claimPatience = time.Second

// patience bounds one try of a call (0: only the caller's context does).
// A claim's try ends at its wait plus claimPatience: an agent that was
// stopped (SIGSTOP, a frozen VM) right after its leader leased tasks to the
// claim would otherwise hold the worker until it resumed, while the new
// leader, asked the same request id through another endpoint, answers
// those leases at once.
func patience(method string, params any) time.Duration {
	if method != MethodTaskClaim {
		return 0
	}
	p, ok := params.(ClaimParams)
	if !ok {
		return 0
	}
	return time.Duration(max(p.WaitMS, 0))*time.Millisecond + claimPatience
}

func (c *Client) delay(attempt int, err error) time.Duration {
	return Backoff(attempt, c.opts.BackoffBase, c.opts.BackoffCap, err)
}

// Backoff is the delay before retry number attempt (0-based): exponential
// from base with full jitter, uniform in [0, min(ceiling, base*2^attempt)],
// and never shorter than the retry_after_ms of a -32004 answer.
func Backoff(attempt int, base, ceiling time.Duration, err error) time.Duration {
	ceil := ceiling
	if attempt < 30 {
		ceil = min(ceil, base<<attempt)
	}
	d := rand.N(ceil + 1)
	var pe *Error
	if errors.As(err, &pe) && pe.Code == CodeUnavailable {
		d = max(d, pe.RetryAfter())
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get returns the current connection, dialling the current endpoint if
// there is none. A failed dial moves to the next endpoint.
func (c *Client) get(ctx context.Context) (*Conn, error) {
	if conn, err := c.current(); conn != nil || err != nil {
		return conn, err
	}
	select {
	case c.dialSlot <- struct{}{}:
		defer func() { <-c.dialSlot }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if conn, err := c.current(); conn != nil || err != nil {
		return conn, err // another caller dialled meanwhile
	}
	c.mu.Lock()
	ep := c.endpoints[c.idx]
	if l := c.r.lead; l != nil && l.ep == ep && alive(l.conn) {
		// The leader connection is to this endpoint already: share it.
		c.conn = l.conn
		c.mu.Unlock()
		c.connected(ep)
		return l.conn, nil
	}
	c.mu.Unlock()
	conn, i, err := c.dialAny(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.idx = (c.idx + 1) % len(c.endpoints)
		return nil, err
	}
	if c.closed {
		conn.Close()
		return nil, ErrClosed
	}
	c.idx, c.conn = i, conn
	c.connected(conn.Endpoint())
	return conn, nil
}

// connected announces a new current connection to ep.
func (c *Client) connected(ep string) {
	c.log.Debug("rpc: connected", "endpoint", ep)
	if f := c.opts.OnConnect; f != nil {
		go f(ep)
	}
}

func alive(conn *Conn) bool {
	select {
	case <-conn.Done():
		return false
	default:
		return true
	}
}

// current returns the live connection, or nil; a dead one is dropped (and
// the endpoint rotated).
func (c *Client) current() (*Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.conn == nil {
		return nil, nil
	}
	select {
	case <-c.conn.Done():
		c.conn = nil
		c.idx = (c.idx + 1) % len(c.endpoints)
		return nil, nil
	default:
		return c.conn, nil
	}
}

// drop forgets conn after a connection error: as the current connection
// it moves to the next endpoint (concurrent callers failing on the same conn
// rotate once); as the leader connection it sends the next leader-bound call
// to learn who leads.
func (c *Client) drop(conn *Conn) {
	if conn == nil {
		return // a failed dial already rotated
	}
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
		c.idx = (c.idx + 1) % len(c.endpoints)
	}
	if l := c.r.lead; l != nil && l.conn == conn {
		c.r.lead, l.retired = nil, true
		c.r.leaderID = "" // learn it again
	}
	c.mu.Unlock()
	conn.Close()
}

// CloseWrite half-closes the client's connections (see Conn.CloseWrite):
// calls in progress get the answers the agent still sends, new calls fail
// with ErrClosed. A worker that stops claiming half-closes its claim
// connection, so a claim the agent answered in that instant still reaches
// it. Close it afterwards.
func (c *Client) CloseWrite() {
	for _, conn := range c.shut(false) {
		conn.CloseWrite()
	}
}
