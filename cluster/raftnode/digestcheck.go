package raftnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/store"
)

// The replicated digest check (DESIGN.md, "Digest check").
//
//  1. The leader's digest loop proposes a DigestMark (at most every
//     DigestInterval, and only if entries were applied since the last
//     check). It changes no state.
//  2. Every node, when it applies the mark at index N, cuts its apply
//     batch there and pins a read view of its state at exactly N (a badger
//     read transaction: cheap, on raft's FSM goroutine), then hashes that
//     view on another goroutine (fsm.PinDigest). Applying goes on.
//  3. The leader waits for its own digest at N and proposes a
//     DigestVerdict{N, digest}.
//  4. Every node that applies the verdict compares it with its own digest
//     at N. A node whose digest differs has diverged: it marks itself
//     unhealthy (Health, /readyz), the daemon refuses its client calls,
//     a leader hands leadership over, and the log says how to rebuild it.
//     A node that has no digest for N (it was restored from a snapshot
//     after N, or restarted past it) ignores the verdict.

// digestKeep is how many computed digests a node remembers.
const digestKeep = 4

type digestState struct {
	n *Node

	mu       sync.Mutex
	own      map[uint64]string // index -> this node's digest there
	pending  map[uint64]bool   // digests being computed
	verdicts map[uint64]string // verdicts that arrived before the digest
	diverged string
	changed  chan struct{} // closed and replaced when own or pending change

	// lastCheck is the leader loop's last verdict index.
	lastCheck uint64
}

func newDigestState(n *Node) *digestState {
	return &digestState{n: n, own: map[uint64]string{}, pending: map[uint64]bool{},
		verdicts: map[uint64]string{}, changed: make(chan struct{})}
}

func (d *digestState) broadcast() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// applied is called by the FSM adapter right after a mark or a verdict at
// index was applied, before anything later is.
func (d *digestState) applied(kind fsm.MsgType, index uint64, v fsm.DigestVerdict) {
	switch kind {
	case fsm.MsgDigestMark:
		d.mu.Lock()
		busy := len(d.pending) > 0
		if !busy {
			d.pending[index] = true
		}
		d.mu.Unlock()
		if busy { // the previous one is still hashing; skip this check here
			d.n.log.Warn("digest check skipped: the previous digest is still being computed", "index", index)
			return
		}
		compute, err := d.n.fsm.PinDigest()
		if err != nil {
			d.n.fail(&store.StorageError{Op: "digest view", Err: err})
			return
		}
		go d.compute(index, compute)
	case fsm.MsgDigestVerdict:
		d.mu.Lock()
		defer d.mu.Unlock()
		if own, ok := d.own[v.Index]; ok {
			d.compareLocked(v.Index, own, v.Digest)
		} else if d.pending[v.Index] {
			d.verdicts[v.Index] = v.Digest
		}
	}
}

func (d *digestState) compute(index uint64, compute func() (string, uint64, error)) {
	dg, at, err := compute()
	if err != nil {
		d.n.fail(&store.StorageError{Op: "digest", Err: err})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, index)
	defer d.broadcast()
	if err != nil {
		delete(d.verdicts, index)
		return
	}
	if at != index { // cannot happen: the view was pinned right after index
		d.n.log.Error("digest check: pinned view is not at the mark", "mark", index, "view", at)
		return
	}
	d.own[index] = dg
	for len(d.own) > digestKeep {
		oldest := index
		for i := range d.own {
			oldest = min(oldest, i)
		}
		delete(d.own, oldest)
	}
	if want, ok := d.verdicts[index]; ok {
		delete(d.verdicts, index)
		d.compareLocked(index, dg, want)
	}
}

func (d *digestState) compareLocked(index uint64, own, want string) {
	if own == want {
		d.n.log.Debug("digest check passed", "index", index, "digest", own)
		return
	}
	if d.diverged != "" {
		return
	}
	d.diverged = fmt.Sprintf("state diverged from the cluster's at index %d (digest here %s, cluster %s): this node refuses to serve; rebuild it: stop the agent, move its --data-dir away and start it again with the same --node-id, --raft-addr and --peers (the leader sends it a snapshot of the cluster's state, then the log), or `flowd operator raft remove-peer %s` and add a fresh node",
		index, short(own), short(want), d.n.cfg.NodeID)
	d.n.log.Error("digest check failed: "+d.diverged, "index", index, "digest", own, "cluster_digest", want)
	go func() {
		if d.n.IsLeader() && len(d.n.Servers()) > 1 {
			if err := d.n.TransferLeadership(""); err != nil {
				d.n.log.Warn("diverged leader could not hand leadership over", "err", err)
			}
		}
	}()
}

func short(d string) string {
	if len(d) > 16 {
		return d[:16]
	}
	return d
}

// divergence is why this node's state is not the cluster's, or "".
func (d *digestState) divergence() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.diverged
}

// ownDigest waits for this node's digest at index.
func (d *digestState) ownDigest(ctx context.Context, index uint64) (string, error) {
	for {
		d.mu.Lock()
		dg, ok := d.own[index]
		pending, ch := d.pending[index], d.changed
		d.mu.Unlock()
		if ok {
			return dg, nil
		}
		if !pending {
			return "", fmt.Errorf("no digest was computed at index %d", index)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Diverged reports why the digest check found this node's state different
// from the cluster's ("" if it did not).
func (n *Node) Diverged() string { return n.digest.divergence() }

// CheckDigest runs one digest check now (leader only): it proposes a mark,
// waits for its own digest at the mark's index and proposes the verdict.
// It returns the index checked.
func (n *Node) CheckDigest(ctx context.Context) (uint64, error) {
	_, idx, err := n.proposeEncoded(ctx, fsm.EncodeDigestMark())
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dg, err := n.digest.ownDigest(wctx, idx)
	if err != nil {
		return idx, err
	}
	_, vidx, err := n.proposeEncoded(ctx, fsm.EncodeDigestVerdict(idx, dg))
	if err != nil {
		return idx, err
	}
	n.digest.mu.Lock()
	n.digest.lastCheck = vidx
	n.digest.mu.Unlock()
	return idx, nil
}

// digestLoop checks digests every DigestInterval while entries are being
// applied; an idle cluster proposes nothing.
func (n *Node) digestLoop(ctx context.Context) {
	every := n.cfg.DigestInterval
	if every < 0 {
		return
	}
	if every == 0 {
		every = cluster.DefaultDigestInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.digest.mu.Lock()
		last := n.digest.lastCheck
		n.digest.mu.Unlock()
		if n.fsm.AppliedIndex() <= last || n.Diverged() != "" {
			continue
		}
		if _, err := n.CheckDigest(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("digest check", "err", err)
		}
	}
}
