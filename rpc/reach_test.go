package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

func status(node, leader, state, lastContact string, voters int) *ClusterStatus {
	st := &ClusterStatus{NodeID: node, LeaderID: leader, State: state, LastContact: lastContact}
	for i := 1; i <= voters; i++ {
		st.Peers = append(st.Peers, Peer{ID: fmt.Sprintf("n%d", i), Suffrage: "voter"})
	}
	return st
}

// The verdict of a survey: who is reachable, whether any reports a leader,
// and whether a majority can be reachable at all.
func TestSurveyVerdict(t *testing.T) {
	refusedErr := &ConnError{Endpoint: "unix:///a", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, NotSent: true}
	noFile := &ConnError{Endpoint: "unix:///b", Err: &net.OpError{Op: "dial", Err: fs.ErrNotExist}, NotSent: true}
	slow := &ConnError{Endpoint: "tcp://c", Err: context.DeadlineExceeded, NotSent: true}
	tlsErr := &ConnError{Endpoint: "tls://d", Err: &TLSError{Endpoint: "tls://d", Problem: "p", Err: x509.UnknownAuthorityError{}}, NotSent: true}
	up := func(st *ClusterStatus) EndpointState {
		return EndpointState{Endpoint: "unix:///" + st.NodeID, Status: st}
	}
	down := func(err error) EndpointState { return EndpointState{Endpoint: "x", Err: err} }
	for _, c := range []struct {
		name string
		eps  []EndpointState
		want error // nil: no verdict
		msg  string
	}{
		{"all refused", []EndpointState{down(refusedErr), down(noFile), down(refusedErr)}, ErrNoAgent,
			"no agent is listening at any of these 3 addresses"},
		{"one silent", []EndpointState{down(refusedErr), down(slow)}, ErrNoAgent, "no agent answered at any of these 2 addresses"},
		{"TLS", []EndpointState{down(tlsErr), down(refusedErr)}, ErrTLS, "TLS problem with tls://d"},
		{"leader known", []EndpointState{up(status("n1", "n2", "follower", "10ms", 3)), down(refusedErr)}, nil, ""},
		{"leader known, others silent", []EndpointState{up(status("n1", "n2", "follower", "10ms", 3)), down(slow), down(slow)}, nil, ""},
		{"stale leader, others dead", []EndpointState{up(status("n3", "n1", "follower", "200ms", 3)), down(refusedErr), down(noFile)},
			ErrNoQuorum, "1 of 3 agents reachable, no quorum: writes stop until a majority is back (start the others or see `flowd operator raft list-peers`); up: n3 follower (still names n1, which is down, as leader)"},
		{"leader without its majority", []EndpointState{up(status("n1", "n1", "leader", "0", 3)), down(refusedErr), down(refusedErr)},
			ErrNoQuorum, "n1 leader (without a majority"},
		{"1 of 3, candidate", []EndpointState{up(status("n3", "", "candidate", "40s", 3)), down(refusedErr), down(refusedErr)},
			ErrNoQuorum, "1 of 3 agents reachable, no quorum: writes stop until a majority is back"},
		{"1 of 3 just now", []EndpointState{up(status("n3", "", "candidate", "200ms", 3)), down(refusedErr), down(refusedErr)},
			ErrNoQuorum, "n3 candidate, no leader for 200ms"},
		{"2 of 3 electing", []EndpointState{up(status("n2", "", "candidate", "400ms", 3)), up(status("n3", "", "follower", "500ms", 3)), down(refusedErr)},
			nil, ""},
		{"2 of 3 leaderless for long", []EndpointState{up(status("n2", "", "candidate", "9s", 3)), up(status("n3", "", "follower", "8s", 3)), down(refusedErr)},
			ErrNoQuorum, "2 of 3 agents reachable"},
		{"only one endpoint, fresh", []EndpointState{up(status("n3", "", "candidate", "1s", 3))}, nil, ""},
		{"only one endpoint, never led", []EndpointState{up(status("n3", "", "candidate", "never", 3))}, ErrNoQuorum, "never reached a leader"},
		{"hello only", []EndpointState{{Endpoint: "a", Hello: &HelloResult{NodeID: "n1"}}, down(refusedErr), down(refusedErr)}, ErrNoQuorum, "1 of 3"},
	} {
		err := (&Survey{Endpoints: c.eps}).Verdict()
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want no verdict", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		case c.want != nil && !strings.Contains(err.Error(), c.msg):
			t.Errorf("%s: %q lacks %q", c.name, err, c.msg)
		case c.want != nil && (!errors.Is(err, domain.ErrUnavailable) || ToError(err).Code != CodeUnavailable):
			t.Errorf("%s: %v does not map to -32004", c.name, err)
		}
	}
}

// A FailFast client with no agent behind any endpoint answers at once and
// names every endpoint; one without FailFast keeps retrying until its
// context ends, as before.
func TestFailFastNoAgent(t *testing.T) {
	dir := t.TempDir()
	eps := []string{"unix://" + dir + "/a.sock", "unix://" + dir + "/b.sock", "unix://" + dir + "/c.sock"}
	c, err := NewClient(eps, ClientOptions{FailFast: true, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = c.ClusterStatus(ctx)
	if !errors.Is(err, ErrNoAgent) || time.Since(t0) > time.Second {
		t.Fatalf("after %v: %v", time.Since(t0), err)
	}
	for _, ep := range eps {
		if !strings.Contains(err.Error(), ep+" (no such socket file)") {
			t.Fatalf("%s not named: %v", ep, err)
		}
	}
	var ce *ConnError
	if !errors.As(err, &ce) {
		t.Fatalf("%v does not unwrap to a *ConnError", err)
	}
}

// TLS failures are named: an unknown authority, a certificate for another
// name, TLS to a plain listener, plain text to a TLS one.
func TestTLSProblemsAreNamed(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes below fail on purpose
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	trusted := x509.NewCertPool()
	trusted.AddCert(srv.Certificate())

	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	go func() {
		for {
			nc, err := plain.Accept()
			if err != nil {
				return
			}
			_, _ = nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			nc.Close()
		}
	}()

	for _, c := range []struct {
		name, ep string
		opts     ClientOptions
		want     string
	}{
		{"unknown authority", "tls://127.0.0.1:" + port, ClientOptions{}, "signed by an authority this client does not trust"},
		{"other name", "tls://localhost:" + port, ClientOptions{TLS: &tls.Config{RootCAs: trusted, MinVersion: tls.VersionTLS12}},
			"does not name the address dialled"},
		{"plain listener", "tls://" + plain.Addr().String(), ClientOptions{}, "does not speak TLS"},
		{"TLS listener, plain client", "tcp://127.0.0.1:" + port, ClientOptions{Token: "flowd_x"}, "the agent speaks TLS and this client did not"},
		{"TLS listener, plain client without a token", "tcp://127.0.0.1:" + port, ClientOptions{}, "use tls://127.0.0.1:" + port},
	} {
		c.opts.FailFast, c.opts.DialTimeout = true, time.Second
		cl, err := NewClient([]string{c.ep}, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = cl.ClusterStatus(ctx)
		cancel()
		cl.Close()
		if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "listening there") {
			t.Errorf("%s: %v; want ErrTLS saying %q", c.name, err, c.want)
		}
	}
}
