package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// ACL tokens on the TCP client listener (docs/operations.md, "Security";
// docs/rpc.md, "Authentication").
//
// The listener speaks TLS with the node's certificate (plaintext only with
// --insecure-plaintext). A caller proves its role with a bearer token sent
// as the connection's first request, agent.auth {"token": SECRET}: the
// agent hashes it (SHA-256), looks the hash up in the replicated state and
// answers; from then on the connection has the token's role and is named by
// the token's id in the logs and the audit log. A connection whose first
// request is anything else has --client-role (none by default: every call
// is -32007). The token is checked once per connection; when a token is
// deleted, the agents close the connections it opened (within about a
// second of the delete being applied on their node).
//
// Tokens are made by admins (acl.token.create, audited): the agent that
// takes the call makes the secret (32 bytes from crypto/rand) and its id,
// and proposes only the hash, so neither the log nor snapshots hold a
// secret. The first admin token is made over the Unix socket, whose admins
// are known by their uid (SO_PEERCRED).

// tokenPrefix starts every secret (so scanners and humans recognise one).
const tokenPrefix = "flowd_"

// authTimeout bounds a TLS handshake plus the first request line.
const authTimeout = 10 * time.Second

// aclReader is the FSM's token reads (beside stateReader, so fakes of the
// seam need not implement them).
type aclReader interface {
	ACLTokens() ([]fsm.ACLToken, error)
	ACLTokenByHash(hash string) (*fsm.ACLToken, error)
	ACLTokenExists(id string) (bool, error)
}

func (a *Agent) aclState() (aclReader, error) {
	r, ok := a.state.(aclReader)
	if !ok {
		return nil, errors.New("this agent's state has no ACL tokens")
	}
	return r, nil
}

// authLate answers agent.auth when it is not a TCP connection's first
// request (that one is answered before the server sees it).
func (a *Agent) authLate(context.Context, rpc.AuthParams) (rpc.AuthResult, error) {
	return rpc.AuthResult{}, rpc.Errorf(rpc.CodeInvalidRequest,
		"agent.auth is accepted only as the first request on a connection to the TCP client listener "+
			"(the Unix socket knows its callers by uid; reconnect and send it first)")
}

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

func (a *Agent) aclTokenCreate(ctx context.Context, p rpc.ACLTokenCreateParams) (rpc.ACLTokenCreateResult, error) {
	var secret string
	if p.ID == "" && p.SecretHash == "" {
		// This agent makes the secret; only its hash leaves it, so a
		// forward retried to a new leader stores the same token.
		var b [32]byte
		_, _ = rand.Read(b[:])
		secret = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
		p.ID, p.SecretHash = randomHex(8), hashSecret(secret)
	}
	cmd := &fsm.ACLTokenCreate{ID: p.ID, Name: p.Name, Role: strings.ToLower(strings.TrimSpace(p.Role)), Hash: p.SecretHash}
	if err := fsm.ValidateACLToken(cmd); err != nil {
		return rpc.ACLTokenCreateResult{}, err
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	fwd := p
	fwd.Role = cmd.Role
	res, err := onLeader(ctx, a.proxy, rpc.MethodACLTokenCreate, fwd, func(ctx context.Context) (rpc.ACLTokenCreateResult, error) {
		r, idx, err := propose[fsm.ACLTokenResult](ctx, a.prop, cmd, alone)
		if err != nil {
			return rpc.ACLTokenCreateResult{}, err
		}
		t := r.Token
		return rpc.ACLTokenCreateResult{ACLToken: rpc.ACLToken{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt}, Index: idx}, nil
	})
	res.Secret = secret
	return res, err
}

func (a *Agent) aclTokenList(context.Context, struct{}) (rpc.ACLTokenListResult, error) {
	r, err := a.aclState()
	if err != nil {
		return rpc.ACLTokenListResult{}, err
	}
	ts, err := r.ACLTokens()
	out := rpc.ACLTokenListResult{Tokens: make([]rpc.ACLToken, 0, len(ts))}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, rpc.ACLToken{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt})
	}
	return out, err
}

func (a *Agent) aclTokenDelete(ctx context.Context, p rpc.ACLTokenDeleteParams) (rpc.ChangedResult, error) {
	if p.ID == "" {
		return rpc.ChangedResult{}, invalid("id is required: the token's id (`flowd acl token list`)")
	}
	return a.changeOnLeader(ctx, rpc.MethodACLTokenDelete, p, &fsm.ACLTokenDelete{ID: p.ID})
}

// clientConn is a connection of the TCP client listener. The listener hands
// it out at once; tcpAdmit, on the connection's own goroutine, completes
// the TLS handshake and reads the first request (authenticate).
type clientConn struct {
	net.Conn               // the TCP connection, then the TLS one
	tlsCfg   *tls.Config   // nil: plaintext
	r        *bufio.Reader // what authenticate read past its request
}

func (c *clientConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

type clientListener struct {
	net.Listener
	tlsCfg *tls.Config
}

func (l clientListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &clientConn{Conn: c, tlsCfg: l.tlsCfg}, nil
}

// clientListener wraps the TCP client listener: TLS with the node's
// certificate (no client certificate asked for) when the agent has one.
func (a *Agent) clientListener(l net.Listener) net.Listener {
	var cfg *tls.Config
	if a.tls != nil {
		cfg = a.tls.ServerConfig(nil).Clone()
		cfg.ClientAuth, cfg.VerifyConnection = tls.NoClientCert, nil
		cfg.MinVersion = tls.VersionTLS12
	}
	return clientListener{Listener: l, tlsCfg: cfg}
}

// tokenConns are the open connections authenticated with each token.
type tokenConns struct {
	mu sync.Mutex
	m  map[string]map[*clientConn]struct{}
}

func (t *tokenConns) add(id string, c *clientConn) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]map[*clientConn]struct{}{}
	}
	if t.m[id] == nil {
		t.m[id] = map[*clientConn]struct{}{}
	}
	t.m[id][c] = struct{}{}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.m[id], c)
		if len(t.m[id]) == 0 {
			delete(t.m, id)
		}
	}
}

// tcpAdmit authenticates a TCP client connection (see the top of the file).
func (a *Agent) tcpAdmit(anon rpc.Role, log *slog.Logger) rpc.AdmitFunc {
	return func(nc net.Conn) (rpc.Caller, func(), error) {
		c := rpc.Caller{UID: -1, GID: -1, PID: -1, Addr: nc.RemoteAddr().String(), Roles: anon}
		cc, ok := nc.(*clientConn)
		if !ok {
			return c, nil, nil
		}
		_ = cc.SetDeadline(time.Now().Add(authTimeout))
		defer cc.SetDeadline(time.Time{})
		if cc.tlsCfg != nil {
			tc := tls.Server(cc.Conn, cc.tlsCfg)
			if err := tc.Handshake(); err != nil {
				log.Warn("client connection refused: TLS handshake failed", "remote", c.Addr, "err", err)
				return c, nil, err
			}
			cc.Conn = tc
		}
		tok, reply, err := a.authenticate(cc)
		if err != nil {
			log.Warn("client connection refused: authentication failed", "remote", c.Addr, "err", err)
			if reply != nil {
				_, _ = cc.Write(reply)
			}
			return c, nil, err
		}
		if tok == nil {
			if anon == rpc.RoleNone {
				log.Debug("client connection without a token: every call will be refused", "remote", c.Addr)
			}
			return c, nil, nil
		}
		role, _ := rpc.ParseRole(tok.Role)
		c.Roles, c.Token, c.TokenName = role, tok.ID, tok.Name
		if _, err := cc.Write(reply); err != nil {
			return c, nil, err
		}
		return c, a.tokens.add(tok.ID, cc), nil
	}
}

// authenticate reads the connection's first request line (without taking
// more than that line from the connection's reader) and, if it is
// agent.auth, checks its token: tok is the token (reply its answer), or
// nil with no error when the first request is something else (left for the
// server). A bad token is an error, with the -32007 reply to send.
func (a *Agent) authenticate(cc *clientConn) (tok *fsm.ACLToken, reply []byte, err error) {
	br := bufio.NewReaderSize(cc.Conn, 4096)
	cc.r = br
	line, err := peekLine(br)
	if err != nil || line == nil || !bytes.Contains(line, []byte(`"`+rpc.MethodAuth+`"`)) {
		if err != nil {
			return nil, nil, fmt.Errorf("no request within %s: %w", authTimeout, err)
		}
		return nil, nil, nil
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params rpc.AuthParams  `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil || req.Method != rpc.MethodAuth {
		return nil, nil, nil // the server answers it
	}
	_, _ = br.Discard(len(line))
	if len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	answer := func(v any) []byte {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, v.(resultOrError).key(): v})
		return append(b, '\n')
	}
	deny := func(msg string) ([]byte, error) {
		e := rpc.Errorf(rpc.CodePermissionDenied, "%s", msg)
		return answer(wireErr{Code: e.Code, Message: e.Message}), errors.New(msg)
	}
	r, rerr := a.aclState()
	if rerr != nil || req.Params.Token == "" {
		reply, err := deny("permission denied: agent.auth needs a token (--token or FLOWD_TOKEN; an admin makes one with `flowd acl token create --role ROLE`)")
		return nil, reply, err
	}
	t, lerr := r.ACLTokenByHash(hashSecret(req.Params.Token))
	if lerr != nil || t == nil {
		reply, err := deny("permission denied: unknown or deleted token; ask an admin for a token (`flowd acl token create --role ROLE`)")
		return nil, reply, err
	}
	return t, answer(authOK{rpc.AuthResult{ID: t.ID, Name: t.Name, Role: t.Role}}), nil
}

type resultOrError interface{ key() string }

type authOK struct{ rpc.AuthResult }

func (authOK) key() string { return "result" }

type wireErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (wireErr) key() string { return "error" }

// peekLine returns the first line of br (with its newline) without
// consuming it, or nil when it does not fit br's buffer (it is then not an
// agent.auth request: those are short).
func peekLine(br *bufio.Reader) ([]byte, error) {
	for n := 1; n <= br.Size(); {
		b, err := br.Peek(n)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return b[:i+1], nil
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, nil
		case err != nil:
			return nil, err
		case br.Buffered() > n:
			n = br.Buffered() // look at what arrived with it first
		default:
			n++
		}
	}
	return nil, nil
}

// watchTokens closes the connections of deleted tokens: after each commit
// (at most every 250 ms, at least every second) it checks the tokens that
// have connections here.
func (a *Agent) watchTokens(ctx context.Context) {
	r, err := a.aclState()
	if err != nil {
		return
	}
	for {
		ch := a.state.Changed()
		t := time.NewTimer(time.Second) // also a backstop to the commit signal
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		a.tokens.mu.Lock()
		ids := make([]string, 0, len(a.tokens.m))
		for id := range a.tokens.m {
			ids = append(ids, id)
		}
		a.tokens.mu.Unlock()
		for _, id := range ids {
			if ok, err := r.ACLTokenExists(id); err != nil || ok {
				continue
			}
			a.tokens.mu.Lock()
			n := len(a.tokens.m[id])
			for c := range a.tokens.m[id] {
				c.Close()
			}
			a.tokens.mu.Unlock()
			a.log.Info("closed the connections of a deleted token", "token", id, "connections", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}
