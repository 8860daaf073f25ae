package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// Reaching a degraded cluster: the client tells apart "nobody is there",
// "somebody is there but there is no majority" and "the TLS setup is
// wrong", quickly, instead of spending a call's whole deadline and then
// blaming the last endpoint it tried.

// Sentinels of a *ReachError (errors.Is). A *ReachError also unwraps to
// domain.ErrUnavailable, so it maps to CodeUnavailable (-32004) like every
// other "cannot reach a leader" error, and code that retries on
// domain.ErrUnavailable keeps doing so.
var (
	// ErrNoAgent: no endpoint accepted a connection (refused, no such
	// socket file, no answer within the dial timeout).
	ErrNoAgent = errors.New("no agent reachable")
	// ErrNoQuorum: agents answer, but none has a leader and too few are
	// reachable for a majority (or they have had none for longer than an
	// election takes): writes stop until a majority is back; reads of an
	// agent's local state still work.
	ErrNoQuorum = errors.New("no quorum")
	// ErrTLS: a TLS handshake failed (unknown authority, a certificate
	// refused either way, TLS spoken to a plain listener or plain text to
	// a TLS one). It is the sentinel of a *TLSError too.
	ErrTLS = errors.New("TLS problem")
)

// TLSError is a TLS failure on one endpoint, with what it means.
type TLSError struct {
	Endpoint string
	// Problem says what went wrong in the operator's terms.
	Problem string
	// Fix says what to do about it.
	Fix string
	Err error
}

func (e *TLSError) Error() string {
	msg := "TLS problem with " + e.Endpoint + ": " + e.Problem
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// Unwrap returns ErrTLS and the cause.
func (e *TLSError) Unwrap() []error { return []error{ErrTLS, e.Err} }

// tlsHandshakeError names the TLS problem behind a failed client handshake
// to ep; withCA says the client was given a CA (else it used the system
// roots, which never hold a flowd cluster CA).
func tlsHandshakeError(ep string, err error, withCA bool) *TLSError {
	te := &TLSError{Endpoint: ep, Err: err}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var rec tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		te.Problem = "the agent's certificate is signed by an authority this client does not trust"
		te.Fix = "give the cluster CA (ca.pem of `flowd tls ca create`) with --ca-cert / FLOWD_CACERT"
	case errors.As(err, &host):
		te.Problem = "the agent's certificate does not name the address dialled"
		te.Fix = "dial a name or IP the certificate holds, or make its certificate with --ip / --dns for this address"
		if !withCA {
			te.Fix += "; and give the cluster CA with --ca-cert / FLOWD_CACERT"
		}
	case errors.As(err, &invalid):
		te.Problem = "the agent's certificate is not valid (" + invalidReason(invalid.Reason) + ")"
		te.Fix = "renew the agent's certificate with `flowd tls cert create` and reload it (SIGHUP)"
	case errors.As(err, &verify):
		te.Problem = "the agent's certificate did not verify"
		te.Fix = "check --ca-cert / FLOWD_CACERT against the cluster CA"
	case errors.As(err, &rec):
		te.Problem = "the listener there does not speak TLS"
		te.Fix = "a flowd client listener always speaks TLS: check the port (not the HTTP or raft one), or use unix:// for a socket"
	case strings.Contains(err.Error(), "remote error: tls:"):
		// The agent sent an alert: crypto/tls gives it no exported type.
		te.Problem = "the agent refused this client's certificate or TLS settings"
		te.Fix = "authenticate with a token (--token / FLOWD_TOKEN), or a client certificate signed by the cluster CA"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		te.Problem = "no TLS answer in time: the listener there may not speak TLS"
		te.Fix = "check the port is an agent's --client-addr"
	default:
		te.Problem = "the handshake failed"
		te.Fix = "check --ca-cert / FLOWD_CACERT and the agent's --client-addr"
	}
	return te
}

func invalidReason(r x509.InvalidReason) string {
	switch r {
	case x509.Expired:
		return "expired or not yet valid"
	case x509.NotAuthorizedToSign:
		return "its issuer may not sign certificates"
	case x509.IncompatibleUsage:
		return "not made for a server"
	}
	return "rejected"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// plainToTLS checks, after a plain tcp:// connection to addr ended before
// the agent answered, whether the listener speaks TLS: it starts a
// handshake (nothing is verified or sent beyond a ClientHello). A server
// hello means the endpoint wants tls://.
func plainToTLS(ctx context.Context, ep, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer nc.Close()
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(nc, &tls.Config{ServerName: host, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // only asks whether TLS is spoken
	herr := tc.HandshakeContext(ctx)
	var rec tls.RecordHeaderError
	if herr != nil && (errors.As(herr, &rec) || errors.Is(herr, io.EOF) || ctx.Err() != nil) {
		return nil // not TLS either
	}
	return &TLSError{Endpoint: ep, Problem: "the agent speaks TLS and this client did not",
		Fix: "use tls://" + addr + " (with --ca-cert / FLOWD_CACERT), not tcp://"}
}

// refused reports a dial failure that means nothing listens there at all.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT)
}

// EndpointState is what one endpoint answered in a Survey.
type EndpointState struct {
	Endpoint string
	// Err is why the endpoint could not be asked (nil: it answered).
	Err error
	// Status is its cluster.status; nil when unreachable, or when the
	// caller's role may not read it (Hello is then set).
	Status *ClusterStatus
	Hello  *HelloResult
}

// leader is who the endpoint's agent follows ("" none).
func (s *EndpointState) leader() string {
	switch {
	case s.Status != nil:
		return s.Status.LeaderID
	case s.Hello != nil:
		return s.Hello.LeaderID
	}
	return ""
}

// Survey is every endpoint's answer, asked in parallel.
type Survey struct {
	Endpoints []EndpointState
}

// leaderlessGrace is how long the reachable agents must have had no leader
// before a survey that cannot count a lost majority calls it one anyway:
// several election rounds at the default timeouts (500 ms).
const leaderlessGrace = 3 * time.Second

// Survey dials every endpoint at once (each bounded by DialTimeout) and asks
// each for cluster.status (agent.hello when the caller's role may not
// read it). It uses connections of its own and changes nothing in c.
func (c *Client) Survey(ctx context.Context) *Survey {
	s := &Survey{Endpoints: make([]EndpointState, len(c.endpoints))}
	done := make(chan struct{}, len(c.endpoints))
	for i, ep := range c.endpoints {
		go func() {
			defer func() { done <- struct{}{} }()
			s.Endpoints[i] = c.ask(ctx, ep)
		}()
	}
	for range c.endpoints {
		<-done
	}
	return s
}

func (c *Client) ask(ctx context.Context, ep string) EndpointState {
	st := EndpointState{Endpoint: ep}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	conn, err := c.dialOne(ctx, ep)
	if err != nil {
		st.Err = err
		return st
	}
	defer conn.Close()
	var cs ClusterStatus
	err = conn.Call(ctx, MethodClusterStatus, struct{}{}, &cs)
	if errors.Is(err, ErrPermissionDenied) {
		var h HelloResult
		if err = conn.Call(ctx, MethodHello, HelloParams{ProtocolVersion: ProtocolVersion, Client: "flowd-go-client"}, &h); err == nil {
			st.Hello = &h
			return st
		}
	}
	if err != nil {
		st.Err = c.explainLost(ctx, ep, err)
		return st
	}
	st.Status = &cs
	return st
}

// Verdict reads the survey: nil when an agent reports a leader that may
// be leading, or the survey cannot tell (an election may be under way);
// otherwise a
// *ReachError whose sentinel is ErrTLS or ErrNoAgent (no agent answered)
// or ErrNoQuorum.
func (s *Survey) Verdict() error {
	var reach, down []EndpointState
	claimed := false // an agent still names a leader
	dead := 0        // endpoints where nothing listens at all
	for _, e := range s.Endpoints {
		if e.Err != nil {
			down = append(down, e)
			if refused(e.Err) {
				dead++
			}
			continue
		}
		reach = append(reach, e)
		claimed = claimed || e.leader() != ""
	}
	re := &ReachError{Endpoints: s.Endpoints, Reachable: len(reach)}
	if len(reach) == 0 {
		re.Kind = ErrNoAgent
		for _, e := range down {
			if errors.Is(e.Err, ErrTLS) {
				re.Kind = ErrTLS
			}
		}
		return re
	}
	voters, leaderless := 0, time.Duration(-1)
	for _, e := range reach {
		if e.Status == nil {
			continue
		}
		n := 0
		for _, p := range e.Status.Peers {
			if p.Suffrage == "" || p.Suffrage == "voter" {
				n++
			}
		}
		voters = max(voters, n)
		since := lastContact(e.Status.LastContact)
		if leaderless < 0 || since < leaderless {
			leaderless = since
		}
	}
	if voters == 0 {
		voters = len(s.Endpoints) // only hello answers: count the endpoints
	}
	re.Voters = voters
	unknown := max(0, voters-len(reach)-len(down)) // members not in the endpoints
	if claimed {
		// An agent names a leader. It may be stale (for a heartbeat
		// timeout after the leader died, or a leader that has not yet
		// stepped down): only when the agents where nothing listens leave
		// too few for a majority can that leader not be leading.
		if len(reach)+(len(down)-dead)+unknown >= voters/2+1 {
			return nil
		}
		re.Kind, re.Leaderless = ErrNoQuorum, -1
		return re
	}
	if len(reach)+unknown >= voters/2+1 && leaderless < leaderlessGrace {
		return nil // a majority may be up: an election, or a leader elsewhere
	}
	re.Kind = ErrNoQuorum
	re.Leaderless = leaderless
	return re
}

// lastContact parses cluster.status last_contact ("never", "0", a Go
// duration); never counts as long ago.
func lastContact(s string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil {
		return d
	}
	if s == "" {
		return 0
	}
	return time.Hour
}

// ReachError says why no call could be made: no agent answered
// (ErrNoAgent), TLS failed (ErrTLS), or the agents that answer have no
// quorum (ErrNoQuorum). Endpoints holds each endpoint's answer.
type ReachError struct {
	Kind      error
	Endpoints []EndpointState
	// Reachable agents, of Voters members (Voters 0 when none answered).
	Reachable, Voters int
	// Leaderless is how long the reachable agents have had no leader (-1
	// unknown); ErrNoQuorum only.
	Leaderless time.Duration
}

// Unwrap returns the sentinel, domain.ErrUnavailable, and each failed
// endpoint's error (a *ConnError, possibly wrapping a *TLSError).
func (e *ReachError) Unwrap() []error {
	errs := []error{e.Kind, domain.ErrUnavailable}
	for _, s := range e.Endpoints {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return errs
}

func (e *ReachError) Error() string {
	var b strings.Builder
	switch e.Kind {
	case ErrNoQuorum:
		fmt.Fprintf(&b, "%d of %d agents reachable, no quorum: writes stop until a majority is back (start the others or see `flowd operator raft list-peers`)", e.Reachable, e.Voters)
		var up []string
		for _, s := range e.Endpoints {
			if s.Err == nil {
				up = append(up, s.describe())
			}
		}
		b.WriteString("; up: " + strings.Join(up, ", "))
		if down := e.causes(); down != "" {
			b.WriteString("; down: " + down)
		}
		return b.String()
	case ErrTLS:
		var tlsErrs []string
		for _, s := range e.Endpoints {
			if te, ok := errors.AsType[*TLSError](s.Err); ok {
				tlsErrs = append(tlsErrs, te.Error())
			}
		}
		b.WriteString(strings.Join(tlsErrs, "; "))
		if len(tlsErrs) < len(e.Endpoints) {
			b.WriteString("; other endpoints: " + e.causes(ErrTLS))
		}
		return b.String()
	}
	allRefused := true
	for _, s := range e.Endpoints {
		allRefused = allRefused && refused(s.Err)
	}
	verb := "is listening"
	if !allRefused {
		verb = "answered"
	}
	if len(e.Endpoints) == 1 {
		fmt.Fprintf(&b, "no agent %s at %s", verb, e.causes())
		return b.String()
	}
	fmt.Fprintf(&b, "no agent %s at any of these %d addresses: %s", verb, len(e.Endpoints), e.causes())
	return b.String()
}

// causes lists the failed endpoints with a short cause each, leaving out
// those whose error is skip.
func (e *ReachError) causes(skip ...error) string {
	var out []string
	for _, s := range e.Endpoints {
		if s.Err == nil || (len(skip) > 0 && errors.Is(s.Err, skip[0])) {
			continue
		}
		out = append(out, s.Endpoint+" ("+shortCause(s.Err)+")")
	}
	return strings.Join(out, ", ")
}

func (s *EndpointState) describe() string {
	switch {
	case s.Status != nil:
		d := s.Status.NodeID + " " + s.Status.State
		switch s.Status.LeaderID {
		case "":
		case s.Status.NodeID:
			return d + " (without a majority: it steps down)"
		default:
			return d + " (still names " + s.Status.LeaderID + ", which is down, as leader)"
		}
		if lc := lastContact(s.Status.LastContact); s.Status.LastContact != "" && s.Status.LastContact != "0" {
			if lc >= time.Hour {
				d += ", never reached a leader"
			} else {
				round := 100 * time.Millisecond
				switch {
				case lc > time.Minute:
					round = time.Second
				case lc < time.Second:
					round = time.Millisecond
				}
				d += ", no leader for " + lc.Round(round).String()
			}
		}
		return d
	case s.Hello != nil:
		return s.Hello.NodeID + " (no leader)"
	}
	return s.Endpoint
}

// shortCause is a dial failure in a few words.
func shortCause(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		return "no such socket file"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "no answer in time"
	}
	if te, ok := errors.AsType[*TLSError](err); ok {
		return "TLS: " + te.Problem
	}
	if ce, ok := errors.AsType[*ConnError](err); ok {
		return ce.Err.Error()
	}
	return err.Error()
}
