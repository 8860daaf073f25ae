package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/rpc"
)

// Node-to-node security (docs/operations.md "Security"; DESIGN.md, "The
// forwarding port serves only forwarding"; cluster/raftnode/DESIGN.md, "Only members
// talk to members").
//
// With --tls-ca/--tls-cert/--tls-key, raft (cluster/raftnode/tls.go) and the
// forwarding port speak TLS 1.3 and require a certificate from the cluster
// CA naming a member of the current raft configuration, on every
// connection, both ways. The certificates are reloaded on SIGHUP
// (Agent.ReloadTLS): new connections get the new ones.
//
// Without them, traffic between nodes is plaintext and unauthenticated, so
// the agent refuses to start when a raft or forwarding address (bound or
// advertised) is not loopback, unless --insecure-plaintext says the
// operator accepts that; either way every start logs a warning.
//
// The forwarding port serves only what an agent forwards (forwardable):
// writes, long polls, leader memory, consistent reads and the snapshot
// calls addressed to a node. Everything else (status, subscriptions, ...)
// is -32601 there, so a member certificate is not a back door to methods
// an agent never sends.

// TLSEnabled reports whether the config asks for mutual TLS between nodes.
func (c *Config) TLSEnabled() bool { return c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "" }

// CheckTransportSecurity checks the TLS flags and refuses plaintext off
// loopback without --insecure-plaintext. Call it after Normalize.
func (c *Config) CheckTransportSecurity() error {
	var problems []string
	if c.TLSEnabled() {
		for flag, v := range map[string]string{"--tls-ca": c.TLSCA, "--tls-cert": c.TLSCert, "--tls-key": c.TLSKey} {
			if v == "" {
				problems = append(problems, flag+" is missing: mutual TLS needs all of --tls-ca, --tls-cert and --tls-key")
			}
		}
		if c.InsecurePlaintext {
			problems = append(problems, "--insecure-plaintext contradicts --tls-ca/--tls-cert/--tls-key; drop one of them")
		}
	} else if exposed := c.exposedAddrs(); len(exposed) > 0 && !c.InsecurePlaintext {
		problems = append(problems, fmt.Sprintf("%s not loopback and no TLS is configured: anyone who can reach these ports could control the cluster. "+
			"Make certificates (`flowd tls ca create --dir D`, then `flowd tls cert create --ca-dir D --node %s --dir D`) and pass "+
			"--tls-ca D/ca.pem --tls-cert D/%s.pem --tls-key D/%s-key.pem, or pass --insecure-plaintext to accept the risk",
			strings.Join(exposed, ", ")+map[bool]string{true: " is", false: " are"}[len(exposed) == 1], c.NodeID, c.NodeID, c.NodeID))
	}
	if c.ClientAddr != "" && !c.TLSEnabled() && !c.InsecurePlaintext {
		// Tokens would cross the network in the clear (acl.go).
		problems = append(problems, fmt.Sprintf("--client-addr %s needs TLS: its callers send bearer tokens. Pass --tls-ca, --tls-cert and --tls-key "+
			"(the listener serves the node's certificate), or --insecure-plaintext to accept the risk", c.ClientAddr))
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid agent configuration:\n  - %s", strings.Join(problems, "\n  - "))
	}
	return nil
}

// exposedAddrs lists the raft and forwarding addresses that are not
// loopback (an unspecified host, 0.0.0.0, counts as exposed).
func (c *Config) exposedAddrs() []string {
	var out []string
	for _, a := range []struct{ flag, addr string }{
		{"--raft-addr", c.RaftAddr}, {"--raft-advertise", c.RaftAdvertise},
		{"--forward-addr", c.ForwardAddr}, {"--forward-advertise", c.ForwardAdvertise},
	} {
		if a.addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil || !loopbackHost(host) {
			out = append(out, a.flag+" "+a.addr)
		}
	}
	return out
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// setupTLS loads the certificates (or warns about plaintext).
func (a *Agent) setupTLS() error {
	if !a.cfg.TLSEnabled() {
		a.log.Warn("raft and forwarding traffic between nodes is plaintext and unauthenticated: anyone who can reach "+
			"these ports can read and change the cluster's state; use --tls-ca, --tls-cert and --tls-key (see `flowd tls --help`)",
			"raft", a.cfg.RaftAddr, "forward", a.cfg.ForwardAddr, "insecure_plaintext", a.cfg.InsecurePlaintext)
		return nil
	}
	s, err := pki.Load(pki.Files{CA: a.cfg.TLSCA, Cert: a.cfg.TLSCert, Key: a.cfg.TLSKey}, a.cfg.NodeID)
	if err != nil {
		return err
	}
	a.tls = s
	a.log.Info("mutual TLS between nodes", append([]any{"ca", a.cfg.TLSCA, "cert", a.cfg.TLSCert}, s.Describe()...)...)
	if left := time.Until(s.Leaf().NotAfter); left < 30*24*time.Hour {
		a.log.Warn("the node certificate expires soon; make a new one and send SIGHUP", "expires_in", left.Round(time.Hour).String())
	}
	return nil
}

// clusterTLS is the raft layer's certificate provider (nil: plaintext).
func (a *Agent) clusterTLS() cluster.TLSProvider {
	if a.tls == nil {
		return nil
	}
	return a.tls
}

// ReloadTLS reads the certificate, key and CA files again (SIGHUP). New
// raft and forwarding connections use them; established ones keep theirs
// until they close. On error the old certificates stay in use.
func (a *Agent) ReloadTLS() error {
	if a.tls == nil {
		return errors.New("this agent runs without TLS (no --tls-ca/--tls-cert/--tls-key); nothing to reload")
	}
	if err := a.tls.Reload(); err != nil {
		return fmt.Errorf("reload certificates (still serving the old ones): %w", err)
	}
	a.log.Info("certificates reloaded; new connections use them", a.tls.Describe()...)
	return nil
}

// isMember accepts node id if it is in the current raft configuration.
func (a *Agent) isMember(id string) error {
	for _, s := range a.node.Servers() {
		if s.ID == id {
			return nil
		}
	}
	return fmt.Errorf("node %q is %w", id, cluster.ErrNotMember)
}

// forwardListener wraps the forwarding port's listener in mutual TLS when
// the agent has certificates.
func (a *Agent) forwardListener(l net.Listener) net.Listener {
	if a.tls == nil {
		return l
	}
	return pki.NewHandshakeListener(l, a.tls.ServerConfig(a.isMember), 5*time.Second, a.log.With("component", "forward-tls"), "forwarding", nil)
}

// forwardConnOptions are those of a connection to a leader's forwarding
// port: forwarded requests and results may be large.
var forwardConnOptions = rpc.ConnOptions{MaxLine: 64 << 20, MaxRequest: 64 << 20}

// forwardDialer opens a connection to a leader's forwarding port.
type forwardDialer func(ctx context.Context, addr string) (*rpc.Conn, error)

// dialLeader is how the leader proxy reaches a forwarding port: over mutual
// TLS when the agent has certificates (the server must be a member), else
// plain TCP.
func (f *leaderProxy) dialLeader(ctx context.Context, addr string) (*rpc.Conn, error) {
	if f.dial != nil {
		return f.dial(ctx, addr)
	}
	return rpc.Dial(ctx, "tcp://"+addr, forwardConnOptions)
}

// tlsForwardDialer dials forwarding ports over mutual TLS.
func (a *Agent) tlsForwardDialer() forwardDialer {
	return func(ctx context.Context, addr string) (*rpc.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, &rpc.ConnError{Endpoint: "tls://" + addr, Err: err, NotSent: true}
		}
		tc := tls.Client(raw, a.tls.ClientConfig(a.isMember))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &rpc.ConnError{Endpoint: "tls://" + addr, Err: fmt.Errorf("TLS handshake: %w", err), NotSent: true}
		}
		return rpc.NewConn(tc, forwardConnOptions), nil
	}
}

// forwardable reports whether an agent ever forwards method, i.e.
// whether the forwarding port serves it: every leader-bound method
// (onLeader), the reads that run on the leader with consistent: true, and
// the snapshot methods addressed to a leader or a node (onNode); see
// rpc.MethodSpec.Forwarded.
func forwardable(method string) bool {
	m, ok := rpc.LookupMethod(method)
	return ok && m.Forwarded()
}

// nodeAddressed methods run on the agent their params name (onNode;
// rpc.FlagNodeAddressed).
var nodeAddressed = methodsWith(rpc.FlagNodeAddressed)
