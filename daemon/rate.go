package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/flowd/flowd/fsm"
)

// rateMeter samples the replicated tasks-done counter once a second and
// reports tasks/s over the last minute.
type rateMeter struct {
	f       *fsm.FSM
	mu      sync.Mutex
	samples []sample
}

type sample struct {
	at   time.Time
	done uint64
}

func newRateMeter(f *fsm.FSM) *rateMeter { return &rateMeter{f: f} }

func (r *rateMeter) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		r.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *rateMeter) sample() {
	c, err := r.f.Counters()
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, sample{at: time.Now(), done: c.TasksDone})
	if len(r.samples) > 61 {
		r.samples = r.samples[len(r.samples)-61:]
	}
}

func (r *rateMeter) perSecond() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) < 2 {
		return 0
	}
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	secs := last.at.Sub(first.at).Seconds()
	if secs <= 0 || last.done < first.done {
		return 0
	}
	return float64(last.done-first.done) / secs
}
