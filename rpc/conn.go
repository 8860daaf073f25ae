package rpc

import (
	gojson "github.com/goccy/go-json"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// ParseEndpoint splits an endpoint into a network and an address for
// net.Dial / net.Listen: "unix:///path/to.sock" and a bare path (absolute or
// relative) are Unix sockets, "tcp://host:port" is TCP.
func ParseEndpoint(endpoint string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		network, address = "unix", strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "tcp://"):
		network, address = "tcp", strings.TrimPrefix(endpoint, "tcp://")
		if _, _, err := net.SplitHostPort(address); err != nil {
			return "", "", fmt.Errorf("rpc: endpoint %q: want tcp://host:port: %w", endpoint, err)
		}
	case strings.Contains(endpoint, "://"):
		return "", "", fmt.Errorf("rpc: endpoint %q: unknown scheme (use unix:///path, /path or tcp://host:port)", endpoint)
	default:
		network, address = "unix", endpoint
	}
	if address == "" {
		return "", "", fmt.Errorf("rpc: endpoint %q has no address", endpoint)
	}
	return network, address, nil
}

// ConnError reports that a call failed because of the connection, not
// because of the server's answer. It wraps domain.ErrUnavailable (so
// errors.Is(err, domain.ErrUnavailable) holds) and the underlying error.
type ConnError struct {
	Endpoint string
	Err      error
	// NotSent is true when the request was certainly not written (the dial
	// failed, or the connection was already broken): any call may be retried.
	NotSent bool
}

func (e *ConnError) Error() string {
	msg := fmt.Sprintf("connection to %s failed: %v", e.Endpoint, e.Err)
	if e.NotSent && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, ErrTLS) {
		msg += " (is a flowd agent listening there?)"
	}
	return msg
}

// Unwrap returns domain.ErrUnavailable and the underlying error.
func (e *ConnError) Unwrap() []error { return []error{domain.ErrUnavailable, e.Err} }

// errServerClosed is a connection the server ended; it unwraps to io.EOF
// (a TLS listener ends a plain-text connection so, which explainLost tells).
var errServerClosed = fmt.Errorf("the server closed the connection%w", eofQuiet{})

// eofQuiet is io.EOF that adds nothing to a message.
type eofQuiet struct{}

func (eofQuiet) Error() string        { return "" }
func (eofQuiet) Is(target error) bool { return target == io.EOF }

// ConnOptions configure a Conn. The zero value is usable.
type ConnOptions struct {
	// OnNotify receives the server's notifications, one at a time, in the
	// order they arrived, on a goroutine of the Conn (never the caller's).
	// It may call Call. Notifications queue while it runs (unbounded), so it
	// should keep up.
	OnNotify func(method string, params json.RawMessage)
	// MaxLine caps one inbound line (default 4 x DefaultMaxLine, 16 MiB). An
	// over-long response fails its call with CodeTooLarge.
	MaxLine int
	// MaxRequest caps one outbound request (default DefaultMaxLine, the
	// server's default limit); a larger one fails with CodeTooLarge unsent.
	MaxRequest int
	// WriteTimeout bounds one write (default 30s); on expiry the connection
	// is considered lost.
	WriteTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Conn is one client connection. Calls may be issued concurrently; each
// waits for the response with its id (responses may arrive in any order).
// When the connection is lost every pending call fails with a *ConnError.
type Conn struct {
	endpoint string
	nc       net.Conn
	opts     ConnOptions
	log      *slog.Logger
	nextID   atomic.Uint64
	writes   chan writeReq
	done     chan struct{} // closed when the connection is finished

	mu  sync.Mutex
	err error // why the connection ended (set once, with done)
	// writeShut is set by CloseWrite: no request is sent after it.
	writeShut bool
	pending   map[uint64]chan reply
	notes     []note
	noteSig   chan struct{}
}

// writeReq is one request for the write loop; b == nil shuts the write
// side (CloseWrite).
type writeReq struct {
	id uint64
	b  []byte
}

type reply struct {
	result json.RawMessage
	err    error
}

type note struct {
	method string
	params json.RawMessage
}

// Dial connects to endpoint (see ParseEndpoint). A failure is a *ConnError
// with NotSent set.
func Dial(ctx context.Context, endpoint string, opts ConnOptions) (*Conn, error) {
	network, addr, err := ParseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &ConnError{Endpoint: endpoint, Err: err, NotSent: true}
	}
	return newConn(nc, endpoint, opts), nil
}

// NewConn runs the client protocol over an established connection (e.g. one
// end of net.Pipe). The Conn owns nc.
func NewConn(nc net.Conn, opts ConnOptions) *Conn {
	return newConn(nc, nc.RemoteAddr().String(), opts)
}

func newConn(nc net.Conn, endpoint string, opts ConnOptions) *Conn {
	if opts.MaxLine <= 0 {
		opts.MaxLine = 4 * DefaultMaxLine
	}
	if opts.MaxRequest <= 0 {
		opts.MaxRequest = DefaultMaxLine
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	c := &Conn{
		endpoint: endpoint,
		nc:       nc,
		opts:     opts,
		log:      opts.Logger,
		writes:   make(chan writeReq),
		done:     make(chan struct{}),
		pending:  map[uint64]chan reply{},
		noteSig:  make(chan struct{}, 1),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	go c.readLoop()
	go c.writeLoop()
	if opts.OnNotify != nil {
		go c.notifyLoop()
	}
	return c
}

// Endpoint returns the endpoint the Conn was dialled to.
func (c *Conn) Endpoint() string { return c.endpoint }

// Done returns a channel closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (ErrClosed after Close), or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; pending calls fail with ErrClosed. It does
// not wait for an OnNotify callback in progress.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

// CloseWrite half-closes the connection: requests already queued are
// written, then the write side is shut (the server sees the end of its
// input), and calls still waiting get the answers the server still sends.
// Later calls fail with ErrClosed. The server answers what it was asked and
// then closes: a long poll it holds on this connection's behalf ends at
// once, with what it has (a claim answers with the tasks it already
// leased, so none is leased to a client that stopped listening). A
// connection that cannot half-close (net.Pipe) is closed instead.
func (c *Conn) CloseWrite() {
	c.mu.Lock()
	if c.err != nil || c.writeShut {
		c.mu.Unlock()
		return
	}
	c.writeShut = true
	c.mu.Unlock()
	select {
	case c.writes <- writeReq{}:
	case <-c.done:
	}
}

// Call sends one request and waits for its response, decoding the result
// into result (if not nil). A server error is an *Error (see FromWire); a
// lost connection a *ConnError; ctx ending returns ctx.Err() at once (a
// response arriving later is dropped).
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.CallUntil(ctx, nil, method, params, result)
}

// CallUntil is Call that also gives up when stop is closed, returning
// context.Canceled as if ctx had been (an agent's forward stops when
// leadership moves, without a context of its own per call).
func (c *Conn) CallUntil(ctx context.Context, stop <-chan struct{}, method string, params, result any) error {
	id := c.nextID.Add(1)
	req, err := encodeRequest(id, method, params)
	if err != nil {
		return err
	}
	if len(req) > c.opts.MaxRequest {
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf(
			"the %s request of %d bytes exceeds the limit of %d bytes; send less (split large specs or inputs)",
			method, len(req), c.opts.MaxRequest)}
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil || c.writeShut {
		err := c.err
		if c.writeShut {
			err = ErrClosed
		}
		c.mu.Unlock()
		return c.connErr(err, true)
	}
	c.pending[id] = ch
	c.mu.Unlock()

	w := writeReq{id: id, b: req}
	select {
	case c.writes <- w:
	case <-c.done:
		c.forget(id)
		return c.connErr(c.Err(), true)
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	case <-stop:
		c.forget(id)
		return context.Canceled
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if raw, ok := result.(*json.RawMessage); ok {
			// Kept as the server wrote it (a line of its own, never
			// reused): an agent relays a leader's answer without decoding.
			*raw = r.result
		} else if result != nil {
			if err := gojson.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("rpc: decoding the %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	case <-stop:
		c.forget(id)
		return context.Canceled
	}
}

func encodeRequest(id uint64, method string, params any) ([]byte, error) {
	var p []byte
	if raw, ok := params.(json.RawMessage); ok {
		// Encoded already (an agent forwarding what its client sent, which
		// the server read as valid JSON): sent as it is, not scanned again.
		if len(raw) == 0 || raw[0] != '{' && raw[0] != '[' {
			return nil, fmt.Errorf("rpc: %s params must be a JSON object or array, not %.40q", method, raw)
		}
		p = raw
	} else if params != nil {
		var err error
		if p, err = gojson.Marshal(params); err != nil {
			return nil, fmt.Errorf("rpc: encoding %s params: %w", method, err)
		}
		if p[0] != '{' && p[0] != '[' && string(p) != "null" {
			return nil, fmt.Errorf("rpc: %s params must encode to a JSON object or array, not %s", method, p)
		}
		if string(p) == "null" {
			p = nil
		}
	}
	if !plainName(method) {
		req := struct {
			V      string          `json:"jsonrpc"`
			ID     uint64          `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{V: "2.0", ID: id, Method: method, Params: p}
		return gojson.Marshal(req)
	}
	// The envelope around encoded params, appended: marshalling it as a
	// struct scanned the params a second time (a forwarded spec, every
	// forwarded call).
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"method":"","params":}`)+20+len(method)+len(p))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(append(append(b, `,"method":"`...), method...), '"')
	if p != nil {
		b = append(append(b, `,"params":`...), p...)
	}
	return append(b, '}'), nil
}

// plainName reports whether a method name needs no escaping in JSON.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

func (c *Conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Conn) connErr(err error, notSent bool) error {
	if err == ErrClosed {
		return ErrClosed
	}
	return &ConnError{Endpoint: c.endpoint, Err: err, NotSent: notSent}
}

// fail ends the connection once: pending calls get err (as a *ConnError
// unless it is ErrClosed).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = map[uint64]chan reply{}
	close(c.done)
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range pending {
		ch <- reply{err: c.connErr(err, false)}
	}
}

// writeLoop writes requests in order; requests queued while a write is in
// progress go out together in the next one (one syscall for many calls
// on a shared connection, such as an agent's forwarding connection).
func (c *Conn) writeLoop() {
	var buf []byte
	shut := false
	for {
		select {
		case w := <-c.writes:
			buf = buf[:0]
			yielded := false
		batch:
			for {
				if w.b == nil {
					shut = true
				} else {
					buf = append(append(buf, w.b...), '\n')
				}
				if shut || len(buf) >= 64<<10 {
					break batch
				}
				select {
				case w = <-c.writes:
					continue
				default:
				}
				if yielded {
					break batch
				}
				// Callers woken together (the replies of one commit, on a
				// follower) get one chance to join this write.
				yielded = true
				runtime.Gosched()
				select {
				case w = <-c.writes:
				default:
					break batch
				}
			}
			if len(buf) > 0 {
				_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
				if _, err := c.nc.Write(buf); err != nil {
					c.fail(fmt.Errorf("write: %w", err))
				}
			}
			if cap(buf) > 256<<10 {
				buf = nil // do not keep a large request's buffer
			}
			if shut {
				c.shutWrite()
				c.drainWrites()
				return
			}
		case <-c.done:
			return
		}
	}
}

// shutWrite shuts the write side of the socket, or the whole connection if
// it cannot half-close.
func (c *Conn) shutWrite() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err == nil {
			return
		}
	}
	c.fail(ErrClosed)
}

// drainWrites fails requests that raced CloseWrite until the connection
// ends.
func (c *Conn) drainWrites() {
	for {
		select {
		case w := <-c.writes:
			c.deliver(w.id, reply{err: ErrClosed})
		case <-c.done:
			return
		}
	}
}

func (c *Conn) readLoop() {
	lr := newLineReader(c.nc, c.opts.MaxLine)
	for {
		line, size, err := lr.next()
		if err == io.EOF {
			err = errServerClosed
		}
		if err != nil {
			c.fail(err)
			return
		}
		if line == nil {
			c.tooLarge(size, lr.head)
			continue
		}
		line = bytes.TrimSpace(line)
		switch {
		case len(line) == 0:
		case line[0] == '[':
			var msgs []json.RawMessage
			if err := json.Unmarshal(line, &msgs); err != nil {
				c.log.Warn("rpc: undecodable batch from server", "endpoint", c.endpoint, "err", err)
			}
			for _, m := range msgs {
				c.handle(m)
			}
		default:
			c.handle(line)
		}
	}
}

func (c *Conn) handle(m []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := gojson.Unmarshal(m, &msg); err != nil {
		c.log.Warn("rpc: undecodable message from server", "endpoint", c.endpoint, "err", err)
		return
	}
	if msg.Method != "" {
		if len(msg.ID) > 0 && !isNullJSON(msg.ID) {
			c.log.Warn("rpc: server-to-client calls are not supported", "method", msg.Method)
			return
		}
		if c.opts.OnNotify != nil {
			c.mu.Lock()
			c.notes = append(c.notes, note{msg.Method, msg.Params})
			c.mu.Unlock()
			select {
			case c.noteSig <- struct{}{}:
			default:
			}
		}
		return
	}
	id, err := strconv.ParseUint(string(msg.ID), 10, 64)
	if err != nil {
		c.log.Warn("rpc: server response without a usable id", "endpoint", c.endpoint, "error", msg.Error)
		return
	}
	r := reply{result: msg.Result}
	if msg.Error != nil {
		r.err = FromWire(msg.Error.Code, msg.Error.Message, msg.Error.Data)
	}
	c.deliver(id, r)
}

func (c *Conn) deliver(id uint64, r reply) {
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// tooLarge fails the call an over-long response belongs to, found from the
// id at the start of the line (jrpc2 writes {"jsonrpc":"2.0","id":N,...}).
func (c *Conn) tooLarge(size int, head []byte) {
	err := &Error{Code: CodeTooLarge, Message: fmt.Sprintf(
		"a response of more than %d bytes exceeds the client's limit of %d bytes; ask for less or raise the limit",
		size, c.opts.MaxLine)}
	prefix := []byte(`{"jsonrpc":"2.0","id":`)
	if rest, ok := bytes.CutPrefix(head, prefix); ok {
		if i := bytes.IndexAny(rest, ",}"); i > 0 {
			if id, perr := strconv.ParseUint(string(rest[:i]), 10, 64); perr == nil {
				c.deliver(id, reply{err: err})
				return
			}
		}
	}
	c.log.Warn("rpc: over-long line from server dropped", "endpoint", c.endpoint, "bytes", size)
}

func (c *Conn) notifyLoop() {
	for {
		c.mu.Lock()
		batch := c.notes
		c.notes = nil
		c.mu.Unlock()
		for _, n := range batch {
			c.opts.OnNotify(n.method, n.params)
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-c.noteSig:
		case <-c.done:
			c.mu.Lock()
			empty := len(c.notes) == 0
			c.mu.Unlock()
			if empty {
				return
			}
		}
	}
}
