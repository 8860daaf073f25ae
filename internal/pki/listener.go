package pki

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// MaxPendingHandshakes bounds the TLS handshakes a HandshakeListener runs
// at once; a connection beyond it is dropped (and logged).
const MaxPendingHandshakes = 64

// HandshakeListener completes each TLS server handshake off the accept
// path (one goroutine each, at most MaxPendingHandshakes, each bounded by
// its timeout), so a silent or slow peer cannot hold the listener, and a
// refused peer is logged and never reaches the server behind it. The raft
// stream layer and the forwarding port both serve through it.
type HandshakeListener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	log     *slog.Logger
	what    string // "raft", "forwarding": for log messages
	admit   func(*tls.Conn) (net.Conn, error)

	accepted chan net.Conn
	pending  chan struct{}
	closed   chan struct{}
	once     sync.Once
	err      error
}

// NewHandshakeListener serves TLS on l with cfg. admit, if not nil, runs
// after a handshake succeeds: it may refuse the peer (the connection is
// closed and logged) or wrap the connection Accept returns.
func NewHandshakeListener(l net.Listener, cfg *tls.Config, timeout time.Duration, log *slog.Logger, what string,
	admit func(*tls.Conn) (net.Conn, error)) *HandshakeListener {
	h := &HandshakeListener{inner: l, cfg: cfg, timeout: timeout, log: log, what: what, admit: admit,
		accepted: make(chan net.Conn), pending: make(chan struct{}, MaxPendingHandshakes), closed: make(chan struct{})}
	go h.loop()
	return h
}

func (h *HandshakeListener) loop() {
	for {
		c, err := h.inner.Accept()
		if err != nil {
			select {
			case <-h.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				h.closeWith(err)
				return
			}
			h.log.Warn(h.what+" listener: accept failed; retrying", "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-h.closed:
				return
			}
			continue
		}
		select {
		case h.pending <- struct{}{}:
		default:
			h.log.Warn(h.what+" listener: too many TLS handshakes in progress; dropping a connection", "remote", c.RemoteAddr())
			c.Close()
			continue
		}
		go h.handshake(c)
	}
}

func (h *HandshakeListener) handshake(c net.Conn) {
	defer func() { <-h.pending }()
	tc := tls.Server(c, h.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	var out net.Conn = tc
	if err == nil && h.admit != nil {
		out, err = h.admit(tc)
	}
	if err != nil {
		h.log.Warn(h.what+" connection refused", "remote", c.RemoteAddr(), "err", err)
		tc.Close()
		return
	}
	select {
	case h.accepted <- out:
	case <-h.closed:
		out.Close()
	}
}

// Accept returns the next connection that passed its handshake.
func (h *HandshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-h.accepted:
		return c, nil
	case <-h.closed:
		if h.err != nil && !errors.Is(h.err, net.ErrClosed) {
			return nil, h.err
		}
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes the inner listener.
func (h *HandshakeListener) Close() error { return h.closeWith(nil) }

// Addr is the inner listener's address.
func (h *HandshakeListener) Addr() net.Addr { return h.inner.Addr() }

func (h *HandshakeListener) closeWith(cause error) error {
	var err error
	h.once.Do(func() {
		h.err = cause
		close(h.closed)
		err = h.inner.Close()
	})
	return err
}
