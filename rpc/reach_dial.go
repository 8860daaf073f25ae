package rpc

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"time"
)

// dialStagger is how long the client waits for the current endpoint to
// connect before it dials the others too (at once when the current one
// fails): a dead agent costs one refused dial, a silent one this much.
const dialStagger = 200 * time.Millisecond

// dialOne opens one connection to ep, bounded by ctx.
func (c *Client) dialOne(ctx context.Context, ep string) (*Conn, error) {
	return dialEndpoint(ctx, ep, &c.opts)
}

// dialAny connects to the current endpoint, and to all the others at once
// when that fails or takes longer than dialStagger; each dial is bounded by
// DialTimeout. The first connection made wins (later ones are closed); it
// returns its endpoint's index. When every dial fails the error is a
// *ReachError (ErrNoAgent, or ErrTLS when a handshake failed) that also
// unwraps to each endpoint's *ConnError.
func (c *Client) dialAny(ctx context.Context) (*Conn, int, error) {
	c.mu.Lock()
	start := c.idx
	c.mu.Unlock()
	n := len(c.endpoints)
	type result struct {
		i    int
		conn *Conn
		err  error
	}
	results := make(chan result, n)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	launch := func(i int) {
		go func() {
			ctx, cancel := context.WithTimeout(dctx, c.opts.DialTimeout)
			defer cancel()
			conn, err := c.dialOne(ctx, c.endpoints[i])
			results <- result{i, conn, err}
		}()
	}
	launch(start)
	launched, pending := 1, 1
	rest := func() {
		if launched == 1 && n > 1 {
			for k := 1; k < n; k++ {
				launch((start + k) % n)
			}
			launched, pending = n, pending+n-1
		}
	}
	stagger := time.NewTimer(dialStagger)
	defer stagger.Stop()
	errs := make([]error, n)
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				if pending > 0 {
					go func(left int) { // close the losers as they arrive
						for range left {
							if r := <-results; r.conn != nil {
								r.conn.Close()
							}
						}
					}(pending)
				}
				return r.conn, r.i, nil
			}
			errs[r.i] = r.err
			rest()
		case <-stagger.C:
			rest()
		}
	}
	if n == 1 {
		return nil, 0, errs[0] // as before: the one endpoint's *ConnError
	}
	s := &Survey{Endpoints: make([]EndpointState, n)}
	for i, ep := range c.endpoints {
		s.Endpoints[i] = EndpointState{Endpoint: ep, Err: errs[i]}
	}
	return nil, 0, s.Verdict()
}

// explainLost turns a connection that ended before its first answer into
// a *TLSError when the endpoint is plain tcp:// and its listener speaks
// TLS; otherwise it returns err.
func (c *Client) explainLost(ctx context.Context, ep string, err error) error {
	ce, ok := errors.AsType[*ConnError](err)
	if !ok || c.opts.TLS != nil || !strings.HasPrefix(ep, "tcp://") {
		return err
	}
	if !errors.Is(ce.Err, io.EOF) && !errors.Is(ce.Err, io.ErrUnexpectedEOF) && !errors.Is(ce.Err, syscall.ECONNRESET) {
		return err
	}
	if te := plainToTLS(ctx, ep, strings.TrimPrefix(ep, "tcp://"), c.opts.DialTimeout); te != nil {
		return &ConnError{Endpoint: ep, Err: te, NotSent: ce.NotSent}
	}
	return err
}

// verdict surveys the endpoints (FailFast) and returns the *ReachError
// that should end a call of class, or nil to go on. ErrNoQuorum ends only
// leader-bound calls: a read of local state is served without a leader.
func (c *Client) verdict(ctx context.Context, class routeClass) error {
	v := c.Survey(ctx).Verdict()
	if v == nil || (errors.Is(v, ErrNoQuorum) && class != routeLeader) {
		return nil
	}
	if ctx.Err() != nil {
		return nil // the survey was cut short: it proves nothing
	}
	c.log.Debug("rpc: the cluster cannot serve the call", "err", v)
	return v
}

// leaderUnknown reports that the last attempt to learn who leads found no
// reachable leader (leader routing only).
func (c *Client) leaderUnknown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.fails > 0 && c.r.lead == nil
}

// quorumRecheck is how often a leader-bound call still out is checked
// again after the first QuorumCheck.
const quorumRecheck = 500 * time.Millisecond

// watched runs a leader-bound call of a FailFast client while checking,
// after QuorumCheck and then every quorumRecheck, that the cluster can
// still serve it: an agent cut off from its majority holds a write until
// the call's deadline, waiting for a leader that cannot come. When a
// survey finds no quorum the call is abandoned and the *ReachError
// returned (the agent may still apply the request if a majority returns
// before its own deadline: every flowd write is safe to repeat).
func (c *Client) watched(ctx context.Context, method string, params, result any, policy retryPolicy, class routeClass) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTimer(c.opts.QuorumCheck)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if v := c.verdict(cctx, class); v != nil && errors.Is(v, ErrNoQuorum) {
				found <- v
				cancel()
				return
			}
			t.Reset(quorumRecheck)
		}
	}()
	err := c.attempts(cctx, method, params, result, policy, class)
	if err == nil {
		return nil
	}
	select {
	case v := <-found:
		return v
	default:
		return err
	}
}
