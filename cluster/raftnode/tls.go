package raftnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/internal/pki"
)

// Raft over mutual TLS.
//
// tlsStream is the raft.StreamLayer of a node with certificates (the
// shape of rqlite's tcp.Transport): a TCP listener whose connections are
// TLS servers requiring a client certificate, and a dialer that presents
// the node's certificate. Both sides verify the peer against the cluster CA
// (TLSProvider) and check its identity (the certificate's node id) against
// the current raft configuration:
//
//   - Accept: the peer must be a member, any member, of the configuration
//     as this node knows it now. The check runs in the handshake of every
//     connection, and again on a connection's reads at most once per
//     membershipRecheck, so a member that is removed loses its pooled
//     connections too. A peer that fails never reaches raft: nothing it
//     sends is decoded.
//   - Dial: the server must be the member the configuration lists at that
//     address. This is what makes add_peer of a rogue address harmless: the
//     leader sends a new voter nothing (no snapshot, no log) unless it holds
//     a CA-signed certificate for the id it was added with.
//
// Handshakes run off raft's accept loop (pki.HandshakeListener, shared with
// the forwarding port), one goroutine each, bounded by
// pki.MaxPendingHandshakes and by the transport timeout, so a slow or silent
// peer cannot stall the listener.

const membershipRecheck = time.Second

type tlsStream struct {
	ln        *pki.HandshakeListener
	advertise net.Addr
	tls       cluster.TLSProvider
	timeout   time.Duration
	log       *slog.Logger

	server *tls.Config
	// servers is set once raft exists; until then inbound handshakes wait.
	servers atomic.Pointer[func() []raft.Server]
	ready   chan struct{}
	readyMu sync.Once

	closed  chan struct{}
	closeMu sync.Once
}

func newTLSStream(bind string, advertise net.Addr, p cluster.TLSProvider, timeout time.Duration, log *slog.Logger) (*tlsStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &tlsStream{advertise: advertise, tls: p, timeout: timeout, log: log,
		ready: make(chan struct{}), closed: make(chan struct{})}
	s.server = p.ServerConfig(s.checkMember)
	s.ln = pki.NewHandshakeListener(ln, s.server, timeout, log, "raft", func(tc *tls.Conn) (net.Conn, error) {
		mc := &memberConn{Conn: tc, s: s, id: peerNodeID(tc)}
		mc.checked.Store(time.Now().UnixNano())
		return mc, nil
	})
	return s, nil
}

// setServers gives the layer the live configuration (raft's latest).
func (s *tlsStream) setServers(f func() []raft.Server) {
	s.servers.Store(&f)
	s.readyMu.Do(func() { close(s.ready) })
}

func (s *tlsStream) members() []raft.Server {
	f := s.servers.Load()
	if f == nil {
		return nil
	}
	return (*f)()
}

// checkMember accepts id if it is in the current configuration.
func (s *tlsStream) checkMember(id string) error {
	select {
	case <-s.ready:
	case <-s.closed:
		return cluster.ErrShutdown
	case <-time.After(s.timeout):
		return fmt.Errorf("node %q: raft is not started yet", id)
	}
	for _, srv := range s.members() {
		if string(srv.ID) == id {
			return nil
		}
	}
	return fmt.Errorf("node %q is %w", id, cluster.ErrNotMember)
}

// Accept implements net.Listener: it returns connections whose peer passed
// the handshake and the membership check.
func (s *tlsStream) Accept() (net.Conn, error) { return s.ln.Accept() }

// Close implements net.Listener.
func (s *tlsStream) Close() error {
	var err error
	s.closeMu.Do(func() {
		close(s.closed)
		err = s.ln.Close()
	})
	return err
}

// Addr implements net.Listener: the advertised address.
func (s *tlsStream) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}

// Dial implements raft.StreamLayer: the server must hold a certificate for
// the member the configuration lists at address.
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	var want []string
	for _, srv := range s.members() {
		if srv.Address == address {
			want = append(want, string(srv.ID))
		}
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("raft dial %s: no member of the configuration has this address", address)
	}
	cfg := s.tls.ClientConfig(func(id string) error {
		if slices.Contains(want, id) {
			return nil
		}
		return fmt.Errorf("raft dial %s: the server's certificate is for node %q, the configuration lists %v at this address", address, id, want)
	})
	d := net.Dialer{Timeout: timeout}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	raw, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("raft dial %s: TLS: %w", address, err)
	}
	return tc, nil
}

// memberConn is an accepted raft connection; its reads re-check that the
// peer is still a member.
type memberConn struct {
	*tls.Conn
	s       *tlsStream
	id      string
	checked atomic.Int64 // unix nanos of the last membership check
}

func (c *memberConn) Read(b []byte) (int, error) {
	now := time.Now().UnixNano()
	if now-c.checked.Load() > int64(membershipRecheck) {
		c.checked.Store(now)
		if err := c.s.checkMember(c.id); err != nil {
			c.s.log.Warn("raft connection closed: its peer is no longer a member", "remote", c.RemoteAddr(), "node", c.id)
			c.Conn.Close()
			return 0, err
		}
	}
	return c.Conn.Read(b)
}

// peerNodeID is the common name of a verified peer (its node id; the
// provider's check already required it to be a node certificate).
func peerNodeID(tc *tls.Conn) string {
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.CommonName
}
