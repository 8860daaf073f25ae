package raftnode

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// crashStream is a raft.StreamLayer on loopback whose crash closes the
// listener and every accepted connection, as a process's death does.
type crashStream struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (s *crashStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err == nil {
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
	}
	return c, err
}

func (s *crashStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (s *crashStream) crash() {
	s.Listener.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

// voter starts a peer on addr ("127.0.0.1:0" for any port) that grants
// every pre-vote and vote; crash kills it.
func voter(t *testing.T, addr string) (raft.ServerAddress, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &crashStream{Listener: ln}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: s, MaxPool: raftMaxPool, Timeout: 2 * time.Second,
		Logger: hclog.NewNullLogger()})
	done := make(chan struct{})
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				switch rpc.Command.(type) {
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Granted: true}, nil)
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
				default:
					rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			close(done)
			s.crash()
			tr.Close()
		})
	}
	t.Cleanup(kill)
	return raft.ServerAddress(ln.Addr().String()), kill
}

// fillPool pools raftMaxPool connections to addr (as a leader's heartbeats
// and appends leave them) by asking that many pre-votes at once.
func fillPool(t *testing.T, tr raft.WithPreVote, addr raft.ServerAddress) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, raftMaxPool)
	for range raftMaxPool {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp raft.RequestPreVoteResponse
			errs <- tr.RequestPreVote("b", addr, &raft.RequestPreVoteRequest{Term: 2}, &resp)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("pre-vote before the restart: %v", err)
		}
	}
}

func asker(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, raftMaxPool, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// A peer that restarted on the same address is asked for its pre-vote and
// vote through connections pooled before the restart: raft's transport
// fails on the dead connections (so an election would count the peer as
// refusing and wait a whole election timeout); voteTransport gets the
// grants through a fresh connection.
func TestVoteTransportSurvivesPeerRestart(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrapped=%v", wrapped), func(t *testing.T) {
			addr, kill := voter(t, "127.0.0.1:0")
			raw := asker(t)
			var tr interface {
				raft.WithPreVote
				RequestVote(raft.ServerID, raft.ServerAddress, *raft.RequestVoteRequest, *raft.RequestVoteResponse) error
			} = raw
			if wrapped {
				tr = newVoteTransport(raw, raftMaxPool)
			}
			fillPool(t, tr, addr)
			kill()
			voter(t, string(addr)) // the restarted peer, same address
			var pre raft.RequestPreVoteResponse
			preErr := tr.RequestPreVote("b", addr, &raft.RequestPreVoteRequest{Term: 3}, &pre)
			var vote raft.RequestVoteResponse
			voteErr := tr.RequestVote("b", addr, &raft.RequestVoteRequest{Term: 3}, &vote)
			if !wrapped {
				// The premise: the plain transport fails on a stale connection.
				if preErr == nil || !connLost(preErr) {
					t.Fatalf("plain transport after the peer restarted: pre-vote err %v, want a lost-connection error", preErr)
				}
				return
			}
			if preErr != nil || !pre.Granted {
				t.Fatalf("pre-vote after the peer restarted: granted=%v err=%v", pre.Granted, preErr)
			}
			if voteErr != nil || !vote.Granted {
				t.Fatalf("vote after the peer restarted: granted=%v err=%v", vote.Granted, voteErr)
			}
		})
	}
}

// A peer that is down is not asked more than once per pooled connection
// plus one dial, and the answer is the transport's error.
func TestVoteTransportGivesUpOnDeadPeer(t *testing.T) {
	addr, kill := voter(t, "127.0.0.1:0")
	tr := newVoteTransport(asker(t), raftMaxPool)
	fillPool(t, tr, addr)
	kill()
	var pre raft.RequestPreVoteResponse
	start := time.Now()
	err := tr.RequestPreVote("b", addr, &raft.RequestPreVoteRequest{Term: 3}, &pre)
	if err == nil || pre.Granted {
		t.Fatalf("pre-vote to a dead peer: granted=%v err=%v", pre.Granted, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("pre-vote to a dead peer took %s; it must fail fast", d)
	}
}

func TestConnLost(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{&net.OpError{Op: "write", Err: syscall.EPIPE}, true},
		{msgpackLike{io.EOF}, true},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, false},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		{errors.New("rpc error from the peer"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := connLost(c.err); got != c.want {
			t.Errorf("connLost(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// msgpackLike wraps its cause the way go-msgpack's decode errors do.
type msgpackLike struct{ cause error }

func (e msgpackLike) Error() string { return "msgpack decode error [pos 0]: " + e.cause.Error() }
func (e msgpackLike) Cause() error  { return e.cause }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
