package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// ACL tokens (docs/rpc.md, "Authentication"). A TCP client proves its role
// with a bearer token: the first request on the connection is agent.auth
// {"token": SECRET}; the agent answers it and the connection has the
// token's role from then on. A connection whose first request is anything
// else has the listener's anonymous role (none by default: every call is
// -32007). agent.auth later on a connection, or on the Unix socket (whose
// callers are identified by the kernel), is refused. Tokens are made by an
// admin (acl.token.create) and stored hashed in the replicated state.

// AuthParams are agent.auth's params.
type AuthParams struct {
	Token string `json:"token"`
}

// AuthResult answers agent.auth: the token's public id and role.
type AuthResult struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Role string `json:"role"`
}

// ACLTokenCreateParams are acl.token.create's params. ID and SecretHash
// are filled by the agent that makes the secret (a client leaves them out);
// a follower forwards them so a retried forward stores one token.
type ACLTokenCreateParams struct {
	Role       string `json:"role"`
	Name       string `json:"name,omitempty"`
	ID         string `json:"id,omitempty"`
	SecretHash string `json:"secret_hash,omitempty"`
}

// ACLToken is a token as listed: never its secret.
type ACLToken struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	Role      string `json:"role"`
	CreatedAt int64  `json:"created_at"`
}

// ACLTokenCreateResult answers acl.token.create: the secret, shown once.
type ACLTokenCreateResult struct {
	ACLToken
	Secret string `json:"secret,omitempty"`
	// Index is the entry's index (read-your-writes).
	Index uint64 `json:"index,omitempty"`
}

// WriteIndex implements the read fence's interface.
func (r ACLTokenCreateResult) WriteIndex() uint64 { return r.Index }

// ACLTokenListResult answers acl.token.list.
type ACLTokenListResult struct {
	Tokens []ACLToken `json:"tokens"`
}

// ACLTokenDeleteParams are acl.token.delete's params.
type ACLTokenDeleteParams struct {
	ID string `json:"id"`
}

// ClientTLSConfig returns the TLS configuration of a client of an agent's
// TCP listener: it accepts a server certificate signed by the CA in the
// PEM file caFile (the cluster CA, `flowd tls ca create`), whatever
// address it was dialled at (node certificates name node ids, not
// necessarily the address a client uses).
func ClientTLSConfig(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate (want the cluster's ca.pem)", caFile)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified below, against the CA, without a host name
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the agent presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if err != nil {
				return fmt.Errorf("the agent's certificate is not from the CA in %s: %w", caFile, err)
			}
			return nil
		},
	}, nil
}

// dialEndpoint connects as ClientOptions say: "tls://host:port" (or
// "tcp://host:port" with TLS set) over TLS, and on TCP with a Token it
// authenticates (agent.auth) before any other call.
func dialEndpoint(ctx context.Context, ep string, opts *ClientOptions) (*Conn, error) {
	useTLS := strings.HasPrefix(ep, "tls://")
	if !useTLS && (opts.Token == "" || !strings.HasPrefix(ep, "tcp://")) && opts.TLS == nil {
		return Dial(ctx, ep, opts.Conn)
	}
	network, addr, err := parseClientEndpoint(ep)
	if err != nil {
		return nil, err
	}
	if network != "tcp" {
		return Dial(ctx, ep, opts.Conn) // a Unix socket: the kernel names the caller
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &ConnError{Endpoint: ep, Err: err, NotSent: true}
	}
	if useTLS || opts.TLS != nil {
		cfg := opts.TLS
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, &ConnError{Endpoint: ep, Err: tlsHandshakeError(ep, err, opts.TLS != nil && opts.TLS.RootCAs != nil), NotSent: true}
		}
		nc = tc
	}
	if opts.Token != "" {
		if err := authenticate(ctx, nc, opts.Token); err != nil {
			nc.Close()
			if !useTLS && opts.TLS == nil {
				if _, lost := errors.AsType[*ConnError](err); lost {
					// A TLS listener drops plain text without a word: say
					// so when that is what happened.
					if te := plainToTLS(ctx, ep, addr, opts.DialTimeout); te != nil {
						return nil, &ConnError{Endpoint: ep, Err: te, NotSent: true}
					}
				}
			}
			return nil, err
		}
	}
	return newConn(nc, ep, opts.Conn), nil
}

// DialClient opens one connection to ep as a Client with opts would:
// over TLS for tls:// (or tcp:// with opts.TLS), authenticated with
// opts.Token on TCP, with opts.Conn for the connection. For a caller that
// needs a Conn of its own (the TUI's event stream).
func DialClient(ctx context.Context, ep string, opts ClientOptions) (*Conn, error) {
	return dialEndpoint(ctx, ep, &opts)
}

// parseClientEndpoint is ParseEndpoint plus "tls://host:port".
func parseClientEndpoint(ep string) (network, addr string, err error) {
	if rest, ok := strings.CutPrefix(ep, "tls://"); ok {
		if _, _, err := net.SplitHostPort(rest); err != nil {
			return "", "", fmt.Errorf("rpc: endpoint %q: want tls://host:port: %w", ep, err)
		}
		return "tcp", rest, nil
	}
	return ParseEndpoint(ep)
}

// authenticate sends agent.auth as the connection's first line and reads
// its answer (the server sends nothing before it). It reads one byte at a
// time up to the newline, so nothing after the answer is taken from the
// connection before the Conn reads it.
func authenticate(ctx context.Context, nc net.Conn, token string) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	_ = nc.SetDeadline(dl)
	defer nc.SetDeadline(time.Time{})
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": MethodAuth, "params": AuthParams{Token: token}})
	if _, err := nc.Write(append(req, '\n')); err != nil {
		return &ConnError{Endpoint: nc.RemoteAddr().String(), Err: err, NotSent: true}
	}
	var line []byte
	var b [1]byte
	for {
		if _, err := io.ReadFull(nc, b[:]); err != nil {
			return &ConnError{Endpoint: nc.RemoteAddr().String(), Err: fmt.Errorf("authenticating (agent.auth): %w", err), NotSent: true}
		}
		if b[0] == '\n' {
			break
		}
		if line = append(line, b[0]); len(line) > 64<<10 {
			return errors.New("rpc: the agent.auth answer is over 64 KiB")
		}
	}
	var resp struct {
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("rpc: agent.auth: the agent's answer is not JSON: %w", err)
	}
	if e := resp.Error; e != nil {
		return FromWire(e.Code, e.Message, e.Data)
	}
	return nil
}

// ACLTokenCreate makes a token of role ("admin", "worker" or "read") and
// returns it with its secret, the only time the secret is shown. It is
// sent once (Call): a repeat would make a second token with another
// secret.
func (c *Client) ACLTokenCreate(ctx context.Context, role, name string) (*ACLTokenCreateResult, error) {
	return call[ACLTokenCreateResult](ctx, c.Call, MethodACLTokenCreate, ACLTokenCreateParams{Role: role, Name: name})
}

// ACLTokenList lists the tokens (never their secrets).
func (c *Client) ACLTokenList(ctx context.Context) (*ACLTokenListResult, error) {
	return call[ACLTokenListResult](ctx, c.CallIdempotent, MethodACLTokenList, struct{}{})
}

// ACLTokenDelete deletes a token by id (changed: false when there is none);
// the agents close the connections it opened.
func (c *Client) ACLTokenDelete(ctx context.Context, id string) (*ChangedResult, error) {
	return call[ChangedResult](ctx, c.CallIdempotent, MethodACLTokenDelete, ACLTokenDeleteParams{ID: id})
}
