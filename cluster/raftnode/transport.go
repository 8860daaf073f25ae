package raftnode

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/hashicorp/raft"
)

// raftMaxPool is how many idle connections the transport keeps per peer.
const raftMaxPool = 5

// voteTransport is raft's NetworkTransport with election RPCs that survive
// stale pooled connections.
//
// NetworkTransport keeps up to maxPool idle connections per peer and never
// checks them before reuse. When a peer restarts (a crash, a kill -9, an
// upgrade), every idle connection to its old process is dead, and the next
// RPC on each fails at once (EOF or a reset) while a fresh dial would have
// worked. For heartbeats and appends that costs one retry after a short
// backoff. For an election it costs a whole election timeout: the pre-vote
// or vote to that peer counts as refused, raft does not ask again in that
// round, and a cluster that needs that peer's vote (three nodes, the leader
// gone) waits 0.5-1x ElectionTimeout more before the next round. That is
// what made some failovers 0.5 s slower than others: followers talk to
// each other only during elections, so their idle connections to a peer
// that restarted since stay in the pool, often for many minutes.
//
// So RequestPreVote and RequestVote are retried when they fail the way a
// dead connection fails (connLost), up to maxPool+1 times: each failure
// discards one stale connection, and the last try dials. Both are safe to
// repeat: a pre-vote changes nothing, and a voter that already voted for
// this candidate in this term answers the repeat with the same grant.
// A timeout is not retried (that peer is unreachable, not restarted), nor
// is an answer (a refusal, or an error the peer sent). TimeoutNow is not
// retried: a repeat could make a peer that already won start another
// election. Every other method is NetworkTransport's own.
type voteTransport struct {
	*raft.NetworkTransport
	tries int
}

func newVoteTransport(t *raft.NetworkTransport, maxPool int) *voteTransport {
	return &voteTransport{NetworkTransport: t, tries: maxPool + 1}
}

// RequestVote implements raft.Transport.
func (t *voteTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.retry(func() error { return t.NetworkTransport.RequestVote(id, target, args, resp) })
}

// RequestPreVote implements raft.WithPreVote.
func (t *voteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.retry(func() error { return t.NetworkTransport.RequestPreVote(id, target, args, resp) })
}

func (t *voteTransport) retry(rpc func() error) error {
	var err error
	for range t.tries {
		if err = rpc(); err == nil || !connLost(err) {
			return err
		}
	}
	return err
}

// connLost reports whether err is how an RPC on a connection whose peer
// went away fails: EOF, a reset, a broken pipe or a closed connection,
// possibly inside a msgpack decode error (which carries its cause in
// Cause, not Unwrap). Timeouts and refused dials are not.
func connLost(err error) bool {
	for err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
			errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return true
		}
		c, ok := err.(interface{ Cause() error })
		if !ok {
			return false
		}
		err = c.Cause()
	}
	return false
}
