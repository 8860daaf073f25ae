package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Leader forwarding. Writes (and long polls, and consistent reads) must run
// on the leader. A follower sends the same method and params to the
// leader's forwarding listener, whose address the leader published in the
// replicated state (fsm.NodeInfo) when it took office; until that record
// exists the address is derived from the leader's raft address. A request
// that arrives over the forwarding listener is served there or fails; it is
// never forwarded again, so a stale view of who leads cannot loop.
type forwarder struct {
	a     *Agent
	mu    sync.Mutex
	conns map[string]*rpc.Conn
}

func newForwarder(a *Agent) *forwarder {
	return &forwarder{a: a, conns: map[string]*rpc.Conn{}}
}

// leaderAddr returns the leader's id and forwarding address.
func (f *forwarder) leaderAddr() (string, string) {
	id, raftAddr := f.a.node.Leader()
	if id == "" {
		return "", ""
	}
	if meta := f.a.node.NodeMeta(id); meta["forward"] != "" {
		return id, meta["forward"]
	}
	addr, _ := DeriveForwardAddr(raftAddr)
	return id, addr
}

func (f *forwarder) conn(ctx context.Context, addr string) (*rpc.Conn, error) {
	f.mu.Lock()
	c := f.conns[addr]
	f.mu.Unlock()
	if c != nil {
		select {
		case <-c.Done():
		default:
			return c, nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := rpc.Dial(dctx, "tcp://"+addr, rpc.ConnOptions{MaxLine: 64 << 20, MaxRequest: 64 << 20})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if old := f.conns[addr]; old != nil {
		_ = old.Close()
	}
	f.conns[addr] = c
	f.mu.Unlock()
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = map[string]*rpc.Conn{}
}

// onLeader runs local when this node leads; otherwise it forwards method
// with params to the leader, retrying across elections until ctx ends. It
// returns a retryable -32004 error if no leader could be reached in time.
func onLeader[R any](ctx context.Context, a *Agent, method string, params any, local func(context.Context) (R, error)) (R, error) {
	var zero R
	for {
		if a.node.IsLeader() || isForwarded(ctx) {
			r, err := local(ctx)
			if err == nil || isForwarded(ctx) || !errors.Is(err, cluster.ErrNotLeader) {
				return r, err
			}
		}
		id, addr := a.fwd.leaderAddr()
		switch {
		case id == a.cfg.NodeID:
			// We lead according to raft but local said no: leadership is
			// changing. Wait for it to settle.
		case id == "" || addr == "":
		default:
			c, err := a.fwd.conn(ctx, addr)
			if err == nil {
				var out R
				err = c.Call(ctx, method, params, &out)
				if err == nil {
					return out, nil
				}
				if !errors.Is(err, domain.ErrUnavailable) {
					return zero, err // a real answer from the leader
				}
			}
			a.log.Debug("forward failed; retrying", "method", method, "leader", id, "addr", addr, "err", err)
		}
		if ctx.Err() != nil {
			return zero, unavailable(a, ctx.Err())
		}
		a.node.WaitLeaderChange(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return zero, unavailable(a, ctx.Err())
		}
	}
}

func unavailable(a *Agent, cause error) error {
	id, _ := a.node.Leader()
	reason := "no leader reachable in time (" + cause.Error() + ")"
	if id == "" {
		n := len(a.node.Servers())
		reason = "no leader yet: an election is in progress or fewer than a majority of the " +
			itoa(n) + " nodes are up; start the others or run `flowd operator raft list-peers`"
	}
	return &domain.UnavailableError{Reason: reason, RetryAfter: 300 * time.Millisecond}
}
