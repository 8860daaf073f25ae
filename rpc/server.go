package rpc

import (
	gojson "github.com/goccy/go-json"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"
)

// Handler implements one method. params is the raw "params" value (nil if
// absent). The result must marshal to JSON; an error goes through ToError.
// Handlers run concurrently (also for requests of one connection) and must
// honour ctx, which ends when the connection closes or the server stops.
type Handler func(ctx context.Context, params json.RawMessage) (any, error)

// RawResult is a handler's result encoded already: the server writes it as
// it is, without marshalling (json.RawMessage would be scanned and
// compacted again). It must be one valid JSON value with no newline, such
// as the result member of a line another flowd server wrote: an agent
// relays a leader's answer to a forwarded call so (daemon/forward.go).
type RawResult []byte

// Func adapts a typed function to a Handler. Params are decoded strictly
// into P: absent or null params give the zero P; JSON that does not decode
// into P, an object with fields P does not have, or an object anywhere in
// the params with a member twice (dupkeys.go) is rejected with
// CodeInvalidParams and a message naming the problem. Use json.RawMessage
// as P to decode yourself.
func Func[P, R any](fn func(context.Context, P) (R, error)) Handler {
	t := reflect.TypeFor[P]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	foldTop := t.Kind() == reflect.Struct
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p P
		if len(raw) > 0 && !isNullJSON(raw) {
			if name, dup, deep := duplicateMember(raw, foldTop); dup || deep {
				if deep {
					return nil, Errorf(CodeInvalidParams, "invalid params: nested deeper than %d levels", dupMaxDepth)
				}
				return nil, Errorf(CodeInvalidParams, "invalid params: member %q appears twice in one object; send each member once", name)
			}
			// goccy/go-json decodes (a fraction of encoding/json's cost on
			// the hot path); params it rejects are decoded again with
			// encoding/json, whose errors name the field and types.
			if gojson.UnmarshalWithOption(raw, &p, disallowUnknownFields) != nil {
				p = *new(P)
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&p); err != nil {
					return nil, Errorf(CodeInvalidParams, "invalid params: %s", describeDecodeError(err))
				}
			}
		}
		return fn(ctx, p)
	}
}

// disallowUnknownFields is goccy/go-json's Decoder.DisallowUnknownFields
// as an Unmarshal option: the Decoder allocates a ~1.4 KB stream buffer
// per call, ~4 KB per job on every agent. goccy exports the option flags'
// type but not this flag's constant (1<<4 in its internal/decoder);
// TestParamsRejectUnknownFieldsOnTheFastPath fails if that changes.
func disallowUnknownFields(o *gojson.DecodeOption) { o.Flags |= 1 << 4 }

func describeDecodeError(err error) string {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		where := "params"
		if te.Field != "" {
			where = te.Field
		}
		return fmt.Sprintf("%s: want %s, got %s", where, jsonKind(te.Type), te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return t.String()
}

// Options configure a Server. The zero value is usable.
type Options struct {
	// MaxLine caps one request line, and one result, in bytes
	// (default DefaultMaxLine, 4 MiB).
	MaxLine int
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// MaxConcurrent bounds the handlers running at once per connection
	// (default 64). Long polls (task.claim, run.wait) hold a slot each.
	MaxConcurrent int
	// WriteTimeout bounds one write to a client; a client that does not read
	// for this long is disconnected (default 30s, negative: none). The
	// deadline is re-armed once per 1/16 of it, so a blocked write is cut
	// off after between 15/16 of WriteTimeout and all of it.
	WriteTimeout time.Duration

	// Admit, if set, is called once per connection to identify the peer
	// and give it its roles (auth.go); every call is then checked against
	// the roles its method needs (-32007 when it has none of them). Without
	// Admit every connection has every role.
	Admit AdmitFunc
	// MaxConns caps the connections of one listener (default
	// DefaultMaxConns, negative: none); one over it is answered -32004 and
	// closed.
	MaxConns int
	// MaxConnsPerUID caps the connections of one Unix socket peer uid
	// across the server's listeners (default DefaultMaxConnsPerUID,
	// negative: none). Needs Admit (the peer's uid).
	MaxConnsPerUID int
	// LineTimeout bounds how long a started request line may take to end
	// (default DefaultLineTimeout, negative: none): a slow-loris line is
	// answered -32600 and the connection closed.
	LineTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing for this long while
	// it had no call in flight and no stream (default DefaultIdleTimeout,
	// negative: none).
	IdleTimeout time.Duration
	// MaxPartialBytes bounds the bytes of unfinished request lines held
	// for all connections together (default DefaultMaxPartialBytes,
	// negative: none); a line that would exceed it is dropped and answered
	// -32004. With the 64 KiB read buffer each connection has, a server's
	// memory for requests being received is at most about
	// MaxPartialBytes + connections x 64 KiB.
	MaxPartialBytes int64
}

// ErrServerClosed is returned by Serve and ServeConn after Shutdown or Close.
var ErrServerClosed = errors.New("rpc: server closed")

// ErrClosed reports a closed connection: Notify after the client went away,
// or a Conn or Client used after Close.
var ErrClosed = errors.New("rpc: connection closed")

// Server serves a fixed method table over any number of listeners (Unix or
// TCP) and connections, one jrpc2 server per connection. All its methods are
// safe for concurrent use.
type Server struct {
	methods  map[string]jrpc2.Handler
	handlers map[string]directEntry // the same, unwrapped (direct.go)
	noDirect bool                   // tests: every line goes to jrpc2
	names    []string
	log      *slog.Logger
	maxLine  int
	maxConc  int
	wTimeout time.Duration
	warm     *warm // handlers run on warm goroutines (warm.go)
	admit    AdmitFunc
	maxConns int
	maxUID   int
	lim      chanLimits
	perUID   uidCounter

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*connState]struct{}
	wg        sync.WaitGroup // one count per live connection
}

// NewServer returns a server for the method table. The table is copied.
func NewServer(methods map[string]Handler, opts Options) *Server {
	s := &Server{
		warm:      newWarm(),
		methods:   make(map[string]jrpc2.Handler, len(methods)),
		handlers:  make(map[string]directEntry, len(methods)),
		log:       opts.Logger,
		maxLine:   opts.MaxLine,
		maxConc:   opts.MaxConcurrent,
		wTimeout:  opts.WriteTimeout,
		listeners: map[net.Listener]struct{}{},
		conns:     map[*connState]struct{}{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxLine <= 0 {
		s.maxLine = DefaultMaxLine
	}
	if s.maxConc <= 0 {
		s.maxConc = 64
	}
	if s.wTimeout == 0 {
		s.wTimeout = 30 * time.Second
	}
	s.admit = opts.Admit
	s.maxConns = orDefault(opts.MaxConns, DefaultMaxConns)
	s.maxUID = orDefault(opts.MaxConnsPerUID, DefaultMaxConnsPerUID)
	s.lim.lineTimeout = orDefault(opts.LineTimeout, DefaultLineTimeout)
	s.lim.idleTimeout = orDefault(opts.IdleTimeout, DefaultIdleTimeout)
	if b := orDefault(opts.MaxPartialBytes, DefaultMaxPartialBytes); b > 0 {
		s.lim.budget = &byteBudget{max: b}
	}
	for name, h := range methods {
		s.methods[name] = s.wrap(name, h)
		spec, _ := LookupMethod(name)
		s.handlers[name] = directEntry{name: name, h: h, budget: spec.Flags&FlagWriteBudget != 0}
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	return s
}

// Methods returns the names of the served methods, sorted.
func (s *Server) Methods() []string { return append([]string(nil), s.names...) }

// assigner is the jrpc2.Assigner of a Server. Unknown methods get a handler
// that reports CodeMethodNotFound with a helpful message (a notification to
// an unknown method is still silently dropped, as JSON-RPC requires).
type assigner struct{ s *Server }

func (a assigner) Assign(_ context.Context, method string) jrpc2.Handler {
	if h, ok := a.s.methods[method]; ok {
		return h
	}
	return func(context.Context, *jrpc2.Request) (any, error) {
		return nil, &jrpc2.Error{
			Code:    jrpc2.Code(CodeMethodNotFound),
			Message: fmt.Sprintf("method not found: %q (docs/rpc.md lists the methods)", method),
			Data:    mustJSON(map[string]string{"method": method}),
		}
	}
}

// wrap turns a Handler into a jrpc2.Handler that recovers panics, maps
// errors through ToError into a *jrpc2.Error (which jrpc2 sends as is, code
// and data included) and marshals and size-checks the result itself, so no
// error can reach jrpc2 as a plain Go error (it would become -32098).
func (s *Server) wrap(method string, h Handler) jrpc2.Handler {
	return func(ctx context.Context, req *jrpc2.Request) (any, error) {
		var params json.RawMessage
		_ = req.UnmarshalParams(&params) // never fails for *json.RawMessage
		var res json.RawMessage
		var werr *jrpc2.Error
		s.warm.do(func() { res, werr = s.call(ctx, connOf(ctx), method, h, params) })
		if werr != nil {
			return nil, werr
		}
		return res, nil
	}
}

// call runs one call as the peer of cs (nil: no connection, every role):
// the role check, the handler, its error mapping and its result's encoding
// (on a warm goroutine, see wrap and serveDirect).
func (s *Server) call(ctx context.Context, cs *connState, method string, h Handler, params json.RawMessage) (res json.RawMessage, werr *jrpc2.Error) {
	if need := MethodRoles(method); cs != nil && cs.peer.Roles&need == 0 {
		return nil, s.wireError(method, s.denied(cs, method, need))
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("rpc: handler panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
			res, werr = nil, &jrpc2.Error{
				Code:    jrpc2.Code(CodeInternal),
				Message: fmt.Sprintf("internal error: the %s handler panicked (%v); this is a bug, please report it with the server log", method, p),
			}
		}
	}()
	v, herr := h(ctx, params)
	if herr != nil {
		return nil, s.wireError(method, herr)
	}
	var b []byte
	var merr error
	if r, ok := v.(RawResult); ok {
		b = r // encoded already (a leader's answer an agent relays)
	} else {
		b, merr = gojson.Marshal(v)
	}
	if merr != nil {
		return nil, s.wireError(method, fmt.Errorf("encoding the %s result: %w", method, merr))
	}
	if len(b) > s.maxLine {
		return nil, s.wireError(method, &Error{Code: CodeTooLarge, Message: fmt.Sprintf(
			"the %s result of %d bytes exceeds the limit of %d bytes; ask for less (a smaller limit or page)",
			method, len(b), s.maxLine), Data: mustJSON(map[string]int{"limit_bytes": s.maxLine})})
	}
	return b, nil
}

func (s *Server) wireError(method string, err error) *jrpc2.Error {
	e := ToError(err)
	if e.Code == CodeInternal {
		s.log.Error("rpc: internal error", "method", method, "err", err)
	} else {
		s.log.Debug("rpc: call failed", "method", method, "code", CodeName(e.Code), "err", err)
	}
	return &jrpc2.Error{Code: jrpc2.Code(e.Code), Message: e.Message, Data: e.Data}
}

// connState is one served connection.
type connState struct {
	peer Caller
	ch   *serverChannel
	srv  *jrpc2.Server
	ctx  context.Context // ends when the connection ends; carries connKey

	mu      sync.Mutex
	ended   bool
	spawned sync.WaitGroup

	// Calls served without jrpc2 (direct.go).
	sem      chan struct{}  // one slot per call in flight (Options.MaxConcurrent)
	direct   sync.WaitGroup // calls in flight
	idMu     sync.Mutex
	inflight map[string]struct{} // their ids, for jrpc2's duplicate-id rule
}

type connKey struct{}

func connOf(ctx context.Context) *connState {
	cs, _ := ctx.Value(connKey{}).(*connState)
	return cs
}

// ConnIdentity returns a comparable value naming the connection serving ctx
// (a handler context), the same for every call on it, or nil outside a
// connection. A forwarded call is named by the forwarding member's
// connection.
func ConnIdentity(ctx context.Context) any {
	if cs := connOf(ctx); cs != nil {
		return cs
	}
	return nil
}

// Serve accepts connections on ln and serves each in its own goroutine until
// ln fails, ctx ends (ln is closed; connections served under ctx are closed
// and their handlers cancelled) or Shutdown/Close is called (it then returns
// ErrServerClosed). Serve may be called for several listeners.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var delay time.Duration
	var open atomic.Int64 // this listener's connections
	for {
		nc, err := ln.Accept()
		if err != nil {
			switch {
			case s.isClosed():
				return ErrServerClosed
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, net.ErrClosed):
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("rpc: accept failed; retrying", "addr", ln.Addr(), "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		delay = 0
		if s.maxConns > 0 && open.Load() >= int64(s.maxConns) {
			s.log.Warn("rpc: connection refused: listener at its connection limit", "addr", ln.Addr(), "remote", nc.RemoteAddr(), "limit", s.maxConns)
			go refuse(nc, &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
				"too many connections to %s (limit %d); close idle ones or retry later", ln.Addr(), s.maxConns),
				Data: mustJSON(map[string]int64{"retry_after_ms": 1000})})
			continue
		}
		open.Add(1)
		go func() {
			defer open.Add(-1)
			_ = s.ServeConn(ctx, nc)
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ServeConn serves one connection and returns when it ends: the peer closed
// it (after every request already received was answered, see doc.go), ctx
// ended, or the server was shut down. It returns nil on an orderly end.
func (s *Server) ServeConn(ctx context.Context, nc net.Conn) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	peer := Caller{UID: -1, GID: -1, PID: -1, Addr: addrString(nc.RemoteAddr()), Roles: RoleAll}
	if s.admit != nil {
		p, release, err := s.admit(nc)
		if err != nil {
			var r *Refusal
			if errors.As(err, &r) {
				refuse(nc, r.Err)
			} else {
				nc.Close()
			}
			return err
		}
		if release != nil {
			defer release()
		}
		peer = p
		if peer.UID >= 0 {
			if !s.perUID.acquire(peer.UID, s.maxUID) {
				s.log.Warn("rpc: connection refused: uid at its connection limit", append([]any{"limit", s.maxUID}, peer.LogAttrs()...)...)
				refuse(nc, &Error{Code: CodeUnavailable, Message: fmt.Sprintf(
					"too many connections from uid %d (limit %d); close idle ones or retry later", peer.UID, s.maxUID),
					Data: mustJSON(map[string]int64{"retry_after_ms": 1000})})
				return errors.New("rpc: uid connection limit")
			}
			defer s.perUID.release(peer.UID)
		}
	}
	cs := &connState{peer: peer, ch: newServerChannel(nc, s.maxLine, max(s.wTimeout, 0), s.log, s.lim)}
	cs.ctx = context.WithValue(cctx, connKey{}, cs)
	cs.sem = make(chan struct{}, s.maxConc)
	cs.ch.onClose = cancel
	if !s.noDirect {
		cs.ch.direct = func(id json.RawMessage, method []byte, params json.RawMessage) bool {
			return s.serveDirect(cs, id, method, params)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return ErrServerClosed
	}
	s.conns[cs] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, cs)
		s.mu.Unlock()
		s.wg.Done()
	}()

	opts := &jrpc2.ServerOptions{
		AllowPush:      true,
		DisableBuiltin: true,
		Concurrency:    s.maxConc,
		NewContext:     func() context.Context { return cs.ctx },
	}
	if s.log.Enabled(ctx, slog.LevelDebug-4) {
		opts.Logger = func(text string) { s.log.Log(ctx, slog.LevelDebug-4, "jrpc2: "+text) }
	}
	cs.srv = jrpc2.NewServer(assigner{s}, opts)
	stop := context.AfterFunc(ctx, func() { cs.ch.Close() })
	defer stop()

	s.log.Debug("rpc: connection opened", "remote", nc.RemoteAddr())
	err := cs.srv.Start(cs.ch).Wait()
	cs.ch.Close()
	cs.mu.Lock()
	cs.ended = true
	cs.mu.Unlock()
	cancel() // the connection context ends: spawned goroutines stop
	cs.spawned.Wait()
	cs.direct.Wait()
	s.log.Debug("rpc: connection closed", "remote", nc.RemoteAddr(), "err", err)
	return err
}

// Shutdown stops the server gracefully: listeners close, connections stop
// reading, every request already read is answered, then connections close.
// If ctx ends first, Shutdown calls Close and returns ctx.Err().
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for cs := range s.conns {
		cs.ch.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
}

// Close stops the server at once: listeners and connections close and
// handler contexts are cancelled. It does not wait for handlers to return.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for ln := range s.listeners {
		ln.Close()
	}
	for cs := range s.conns {
		cs.ch.Close()
	}
	return nil
}

// Notify pushes a notification {"method": method, "params": params} to the
// connection whose handler context (or ConnContext) ctx is. It may be called
// from the handler and from goroutines it started; calls are serialized with
// the connection's responses. A notification sent by a handler before it
// returns is written before that handler's response. After the connection
// closed it returns ErrClosed.
func Notify(ctx context.Context, method string, params any) error {
	cs := connOf(ctx)
	if cs == nil {
		return errors.New("rpc: Notify needs a handler context (or its ConnContext)")
	}
	err := cs.srv.Notify(ctx, method, params)
	if errors.Is(err, jrpc2.ErrConnClosed) {
		return ErrClosed
	}
	return err
}

// InputClosed returns a channel closed when the peer of the connection
// serving ctx stops sending: it half-closed, or went away entirely (the two
// look the same on the read side). Requests already received are still
// answered (see doc.go); a handler holding a long poll on behalf of the
// peer, such as a claim that would lease tasks to it, should give up. It
// returns nil (never ready) outside a connection.
func InputClosed(ctx context.Context) <-chan struct{} {
	if cs := connOf(ctx); cs != nil {
		return cs.ch.inputCtx.Done()
	}
	return nil
}

// InputClosedContext is InputClosed as a context, done when the peer stops
// sending, for context.AfterFunc (a callback, not a goroutine per call).
// It returns nil outside a connection.
func InputClosedContext(ctx context.Context) context.Context {
	if cs := connOf(ctx); cs != nil {
		return cs.ch.inputCtx
	}
	return nil
}

// ConnContext returns the context of the connection serving the handler
// context ctx: it carries what Notify needs and ends when the connection
// closes (a handler's own ctx ends when the handler returns). Outside a
// connection it returns ctx.
func ConnContext(ctx context.Context) context.Context {
	if cs := connOf(ctx); cs != nil {
		return cs.ctx
	}
	return ctx
}

// Spawn runs fn in a goroutine that may outlive the handler, e.g. to keep
// pushing notifications: fn gets the connection's context (see
// ConnContext) and must return once it ends; the connection waits for fn
// before it is reported closed. Spawn returns ErrClosed if the connection
// already ended.
func Spawn(ctx context.Context, fn func(ctx context.Context)) error {
	cs := connOf(ctx)
	if cs == nil {
		return errors.New("rpc: Spawn needs a handler context (or its ConnContext)")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.ended {
		return ErrClosed
	}
	cs.ch.spawned.Add(1)
	cs.spawned.Go(func() {
		defer cs.ch.spawned.Add(-1)
		fn(cs.ctx)
	})
	return nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	if s := a.String(); s != "" {
		return s
	}
	return "@"
}
