package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm"
)

// rateWindow is the span perSecond averages over.
const rateWindow = time.Minute

// rateMeter reports tasks/s over the last minute from the replicated
// tasks-done counter.
//
// It samples when state changes, at most once a second, and not at all
// while nothing is applied: an idle agent has no timer running for it. The
// counter only moves with an apply, so between samples it stayed put (up
// to the second a sample may lag a change while busy), and perSecond reads
// the current value itself.
type rateMeter struct {
	f       *fsm.FSM
	mu      sync.Mutex
	samples []sample // oldest first; the first may predate the window
}

type sample struct {
	at   time.Time
	done uint64
}

func newRateMeter(f *fsm.FSM) *rateMeter { return &rateMeter{f: f} }

func (r *rateMeter) run(ctx context.Context) {
	pause := time.NewTimer(time.Second)
	defer pause.Stop()
	for {
		changed := r.f.Changed()
		if c, err := r.f.Counters(); err == nil {
			r.add(time.Now(), c.TasksDone)
		}
		// At most one sample a second, however busy the cluster is; the
		// first change after a quiet spell is sampled at once.
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		pause.Reset(time.Second)
	}
}

func (r *rateMeter) add(at time.Time, done uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.samples); n > 0 && r.samples[n-1].done == done {
		return // unchanged: the older sample says as much
	}
	r.samples = append(r.samples, sample{at: at, done: done})
	r.trim(at)
}

// trim drops samples that the window no longer needs: everything before
// the newest sample taken at or before the window's start.
func (r *rateMeter) trim(now time.Time) {
	start := now.Add(-rateWindow)
	keep := 0
	for i, s := range r.samples {
		if !s.at.After(start) {
			keep = i
		}
	}
	if keep > 0 {
		r.samples = append(r.samples[:0], r.samples[keep:]...)
	}
}

func (r *rateMeter) perSecond() float64 {
	c, err := r.f.Counters()
	if err != nil {
		return 0
	}
	return r.rate(time.Now(), c.TasksDone)
}

// rate is tasks/s between the window's start (or the first sample, if
// younger) and now, when the counter reads done.
func (r *rateMeter) rate(now time.Time, done uint64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trim(now)
	if len(r.samples) == 0 {
		return 0
	}
	first := r.samples[0]
	if start := now.Add(-rateWindow); first.at.Before(start) {
		// The counter read first.done from first.at until the next sample,
		// which is inside the window: that is its value at the start.
		first.at = start
	}
	secs := now.Sub(first.at).Seconds()
	if secs <= 0 || done < first.done {
		return 0
	}
	return float64(done-first.done) / secs
}
