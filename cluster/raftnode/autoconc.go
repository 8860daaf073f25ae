package raftnode

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
)

// Adaptive concurrency: the leader's controller for queues with
// `concurrency: auto` (fsm/apply_autoconc.go).
//
// Every AutoPeriod (1 s) the controller reads the auto queues, takes each
// one's completion latency (claim to completion, both leader-stamped times
// of the records, as the commit's events carry them) over the last
// AutoWindow (10 s) from its in-memory window, and applies domain.NextCap
// with the queue's in-flight and ready counts; it proposes a QueueCap only
// when the cap changes. Only attempts claimed after the queue's last cap
// change count, so a decrease is judged by work run under the new cap and
// one slow burst halves the cap once, not once per period.
//
// The window is leader memory, not replicated: a new leader starts with an
// empty one and holds every cap until fresh completions arrive. With no
// auto queue the controller keeps no timer: it waits for a commit and then
// looks again at most once a period, and the apply path skips every event.

const (
	// DefaultAutoPeriod is how often the controller looks at auto queues.
	DefaultAutoPeriod = time.Second
	// DefaultAutoWindow is how far back completion latency counts.
	DefaultAutoWindow = 10 * time.Second
	// autoSamplesPerQueue bounds a queue's window (the newest are kept).
	autoSamplesPerQueue = 512
)

type latencySample struct{ claimedAt, endedAt int64 }

// autoWindow holds the recent completion latencies of the auto queues.
type autoWindow struct {
	on atomic.Bool // a controller runs and some queue is auto

	mu      sync.Mutex
	queues  map[string]*queueWindow
	changes uint64 // caps this leader changed (tests)
}

type queueWindow struct {
	samples []latencySample // a ring once it holds autoSamplesPerQueue
	next    int             // where the next sample goes once it is full
	// changedAt: the leader time of this leader's last cap change; only
	// attempts claimed at or after it count.
	changedAt int64
}

// observe takes the attempt-ending task events of a commit (called on the
// apply goroutine, after every commit: cheap when no queue is auto).
func (w *autoWindow) observe(evs []fsm.Event) {
	if !w.on.Load() || len(evs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range evs {
		e := &evs[i]
		if e.Kind != "task" || e.Since == 0 {
			continue
		}
		switch e.Outcome {
		case fsm.OutcomeSucceeded, fsm.OutcomeFailed, fsm.OutcomeLeaseExpired, fsm.OutcomeTimedOut:
		default:
			continue
		}
		q := w.queues[e.Queue]
		if q == nil {
			continue
		}
		s := latencySample{claimedAt: e.Since, endedAt: e.At}
		if len(q.samples) < autoSamplesPerQueue {
			q.samples = append(q.samples, s)
			continue
		}
		q.samples[q.next] = s
		q.next = (q.next + 1) % autoSamplesPerQueue
	}
}

// track makes the window follow exactly the queues named (forgetting
// others) and turns observation on (names not empty) or off.
func (w *autoWindow) track(names []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(names) == 0 {
		w.queues = nil
		w.on.Store(false)
		return
	}
	if w.queues == nil {
		w.queues = map[string]*queueWindow{}
	}
	for n := range w.queues {
		if !slices.Contains(names, n) {
			delete(w.queues, n)
		}
	}
	for _, n := range names {
		if w.queues[n] == nil {
			w.queues[n] = &queueWindow{}
		}
	}
	w.on.Store(true)
}

// stats is the count and 90th percentile latency (ms) of queue's attempts
// that ended at or after since and were claimed after its last change.
func (w *autoWindow) stats(queue string, since int64) (int, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[queue]
	if q == nil {
		return 0, 0
	}
	var lat []int64
	for _, s := range q.samples {
		if s.endedAt >= since && s.claimedAt >= q.changedAt {
			lat = append(lat, max(0, s.endedAt-s.claimedAt))
		}
	}
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return len(lat), lat[(len(lat)*9+9)/10-1]
}

func (w *autoWindow) changed(queue string, at int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[queue]; q != nil {
		q.changedAt = at
	}
	w.changes++
}

// AutoCapChanges counts the cap changes this node proposed as leader
// (tests).
func (n *Node) AutoCapChanges() uint64 {
	n.auto.mu.Lock()
	defer n.auto.mu.Unlock()
	return n.auto.changes
}

// autoLoop is the controller (see above); it runs while this node leads.
func (n *Node) autoLoop(ctx context.Context) {
	period, window := n.cfg.AutoPeriod, n.cfg.AutoWindow
	if period <= 0 {
		period = DefaultAutoPeriod
	}
	if window <= 0 {
		window = DefaultAutoWindow
	}
	defer n.auto.track(nil) // a later leadership starts empty
	tick := time.NewTimer(period)
	defer tick.Stop()
	for {
		changed := n.fsm.Changed()
		qs, err := n.fsm.AutoQueues()
		if err != nil {
			n.log.Error("read auto queues", "err", err)
		}
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		n.auto.track(names)
		if len(qs) == 0 && err == nil {
			select { // nothing to control: no timer until state changes
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
		tick.Reset(period)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if len(qs) == 0 {
			continue
		}
		if qs, err = n.fsm.AutoQueues(); err != nil {
			continue
		}
		now := max(n.cfg.Clock().UnixMilli(), n.fsm.Now())
		for _, q := range qs {
			samples, p90 := n.auto.stats(q.Name, now-window.Milliseconds())
			next := domain.NextCap(q.Concurrency, *q.Auto, domain.AutoObservation{
				Samples: samples, LatencyMS: p90, Running: q.Running, Ready: q.Ready})
			if next == q.Concurrency {
				continue
			}
			res, _, err := n.Propose(ctx, &fsm.QueueCap{Name: q.Name, From: q.Concurrency, Cap: next, LatencyMS: p90, Samples: samples})
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("auto concurrency proposal failed", "queue", q.Name, "err", err)
				}
				continue
			}
			if c, ok := res.(*fsm.ChangedResult); ok && c.Changed {
				n.auto.changed(q.Name, max(n.cfg.Clock().UnixMilli(), n.fsm.Now()))
				n.log.Debug("auto concurrency", "queue", q.Name, "from", q.Concurrency, "to", next, "p90_ms", p90, "samples", samples)
			} else if e, isErr := res.(error); isErr {
				n.log.Error("auto concurrency change rejected", "queue", q.Name, "err", e)
			}
		}
	}
}
