package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// Group commit. Concurrent small commands (completions, failures,
// heartbeats) are coalesced into one fsm.Multi entry: while one entry is in
// flight the next requests queue up, and the next flush proposes them all
// at once. A lone request is proposed at once, so an idle cluster adds no
// latency; a busy one spends one raft entry (one fsync, one FSM
// transaction) on many commands.
type batcher struct {
	n        *Node
	mu       sync.Mutex
	queue    []*groupReq
	flushing int
}

// maxFlushers is how many group entries may be in flight at once.
const maxFlushers = 2

// maxGroup bounds the commands in one Multi entry.
const maxGroup = 256

type groupReq struct {
	cmd  fsm.Command
	done chan groupResp
}

type groupResp struct {
	res any
	idx uint64
	err error
}

// ProposeGrouped proposes cmd, possibly together with concurrent commands
// in one Multi entry. It returns cmd's own result or error.
func (n *Node) ProposeGrouped(ctx context.Context, cmd fsm.Command) (any, uint64, error) {
	if !n.IsLeader() {
		return nil, 0, n.notLeader()
	}
	r := &groupReq{cmd: cmd, done: make(chan groupResp, 1)}
	b := n.batch
	b.mu.Lock()
	b.queue = append(b.queue, r)
	if b.flushing < maxFlushers {
		b.flushing++
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case out := <-r.done:
		return out.res, out.idx, out.err
	case <-ctx.Done():
		return nil, 0, &domain.UnavailableError{Reason: "the command did not commit in time; its outcome is unknown", RetryAfter: 250 * time.Millisecond}
	}
}

func (b *batcher) flush() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxGroup)
		if n == 0 {
			b.flushing--
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.propose(batch)
	}
}

func (b *batcher) propose(batch []*groupReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(batch) == 1 {
		res, idx, err := b.n.Propose(ctx, batch[0].cmd)
		batch[0].done <- groupResp{res, idx, err}
		return
	}
	now := b.n.cfg.Clock().UnixMilli()
	multi := &fsm.Multi{Cmds: make([][]byte, len(batch))}
	for i, r := range batch {
		r.cmd.Stamp(now)
		buf, err := fsm.Encode(r.cmd)
		if err != nil {
			multi.Cmds[i] = nil
			continue
		}
		multi.Cmds[i] = buf
	}
	res, idx, err := b.n.Propose(ctx, multi)
	for i, r := range batch {
		switch {
		case err != nil:
			r.done <- groupResp{nil, idx, err}
		default:
			sub := res.(*fsm.MultiResult).Results[i]
			if e, ok := sub.(error); ok {
				r.done <- groupResp{nil, idx, e}
			} else {
				r.done <- groupResp{sub, idx, nil}
			}
		}
	}
}
