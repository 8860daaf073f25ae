package rpc

import (
	"context"
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
	// DialTimeout bounds one connection attempt (default 2s).
	DialTimeout time.Duration
	// OnConnect, if set, is called (on its own goroutine) after each new
	// connection, e.g. to subscribe again: subscriptions are per connection.
	OnConnect func(endpoint string)
	// Conn configures each connection; its OnNotify is ignored (use
	// Client.OnNotify).
	Conn ConnOptions
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Client calls any of several endpoints (the agents of one cluster) over one
// connection at a time, failing over on connection errors. It is safe for
// concurrent use; concurrent calls share the connection.
//
// Retry policy: a connection error (*ConnError: dial failed, connection
// lost) moves to the next endpoint, and the call is retried if it was not
// sent or if the caller marked it idempotent (CallIdempotent). A
// CodeUnavailable answer (no leader yet) is retried on the same connection
// after its retry_after_ms, for idempotent calls only. Other protocol errors
// (-32001 not_found, ...) are returned at once.
type Client struct {
	endpoints []string
	opts      ClientOptions
	log       *slog.Logger
	notify    atomic.Pointer[func(string, json.RawMessage)]
	dialSlot  chan struct{} // one dial at a time

	mu     sync.Mutex
	idx    int   // current endpoint
	conn   *Conn // current connection, nil if none
	closed bool
}

// NewClient returns a client for the endpoints (see ParseEndpoint); it
// connects on the first call.
func NewClient(endpoints []string, opts ClientOptions) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("rpc: no endpoints")
	}
	for _, ep := range endpoints {
		if _, _, err := ParseEndpoint(ep); err != nil {
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
	c := &Client{endpoints: append([]string(nil), endpoints...), opts: opts, log: opts.Logger, dialSlot: make(chan struct{}, 1)}
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

// Endpoint returns the endpoint in use (or to be tried next).
func (c *Client) Endpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endpoints[c.idx]
}

// Close closes the connection; calls in progress and later fail with
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	return nil
}

// Call calls method once; it is retried only if the request was certainly
// not sent. Errors are as for Conn.Call.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, false)
}

// CallIdempotent calls a method that is safe to repeat (a read, or a write
// made idempotent by a client-chosen id), retrying it across connection
// losses and CodeUnavailable answers.
func (c *Client) CallIdempotent(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, true)
}

func (c *Client) call(ctx context.Context, method string, params, result any, idempotent bool) error {
	var err error
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
		if conn, err = c.get(ctx); err == nil {
			if err = conn.Call(ctx, method, params, result); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return err
		}
		var ce *ConnError
		var pe *Error
		switch {
		case errors.As(err, &ce):
			c.drop(conn)
			if !idempotent && !ce.NotSent {
				return err
			}
			c.log.Debug("rpc: connection error; failing over", "method", method, "err", err, "next", c.Endpoint())
		case errors.As(err, &pe) && pe.Code == CodeUnavailable && idempotent:
			c.log.Debug("rpc: unavailable; retrying", "method", method, "err", err)
		default:
			return err
		}
	}
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
	c.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	conn, err := Dial(dctx, ep, c.opts.Conn)
	cancel()
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
	c.conn = conn
	c.log.Debug("rpc: connected", "endpoint", ep)
	if f := c.opts.OnConnect; f != nil {
		go f(ep)
	}
	return conn, nil
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

// drop forgets conn after a connection error and moves to the next
// endpoint; concurrent callers failing on the same conn rotate once.
func (c *Client) drop(conn *Conn) {
	if conn == nil {
		return // a failed dial already rotated
	}
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
		c.idx = (c.idx + 1) % len(c.endpoints)
	}
	c.mu.Unlock()
	conn.Close()
}
