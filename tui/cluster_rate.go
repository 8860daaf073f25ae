package tui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/rpc"
)

// Throughput and latency on the cluster screen, from the event stream the
// TUI already receives (no extra call): every task attempt that ends
// (running -> succeeded, failed or retrying) counts in the 5-second bucket
// of its leader-stamped time; its claim-to-complete latency is the time
// since the claim event of the same attempt, when the TUI saw it. The first
// time the screen is shown it backfills the chart once from events.list
// (the newest rateBackfill retained events, counting only those older than
// the first one the stream delivered, so nothing is counted twice). The
// chart covers the last five minutes (older buckets are dropped); tasks/s
// is the bucket's count divided by its length.

const (
	rateBucket  = 5 * time.Second
	rateBuckets = 60 // five minutes
	maxClaims   = 20000
	// rateBackfill is how many of the newest events the backfill reads.
	rateBackfill = 2000
)

// rateBackfillMsg answers the cluster screen's events.list backfill.
type rateBackfillMsg struct {
	evs []rpc.Event
	err error
}

// rateAgg is one bucket.
type rateAgg struct {
	done   int
	latSum time.Duration
	latN   int
	latMax time.Duration
}

// throughput is the chart's data.
type throughput struct {
	buckets map[int64]*rateAgg // by bucket number (unix time / rateBucket)
	claims  map[string]time.Time
	first   uint64 // index of the first event the stream delivered (0: none yet)
}

// backfill counts the events older than the stream's first.
func (t *throughput) backfill(evs []rpc.Event, now time.Time) {
	old := evs
	if t.first > 0 {
		old = make([]rpc.Event, 0, len(evs))
		for _, e := range evs {
			if e.Index < t.first {
				old = append(old, e)
			}
		}
	}
	t.add(old, now)
}

// stream counts events from the subscription.
func (t *throughput) stream(evs []rpc.Event, now time.Time) {
	if t.first == 0 && len(evs) > 0 {
		t.first = evs[0].Index
		for _, e := range evs {
			t.first = min(t.first, e.Index)
		}
	}
	t.add(evs, now)
}

// backfillCmd reads the newest retained events once.
func (m *clusterModel) backfillCmd() tea.Cmd {
	if m.backfilled {
		return nil
	}
	m.backfilled = true
	client := m.Client
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.EventsList(cx, rpc.EventsListParams{Latest: true, Limit: rateBackfill})
		if err != nil {
			return rateBackfillMsg{err: err}
		}
		return rateBackfillMsg{evs: res.Events}
	}
}

func attemptKey(e *rpc.Event) string {
	return e.RunID + "/" + e.TaskKey + "#" + itoa(e.Attempt)
}

// add counts one batch of events.
func (t *throughput) add(evs []rpc.Event, now time.Time) {
	if t.buckets == nil {
		t.buckets, t.claims = map[int64]*rateAgg{}, map[string]time.Time{}
	}
	for i := range evs {
		e := &evs[i]
		if e.Kind != "task" || e.At.IsZero() {
			continue
		}
		switch {
		case e.To == "running" && (e.Transition == "claim" || e.From == "ready"):
			if len(t.claims) >= maxClaims {
				clear(t.claims) // attempts that never ended (or were missed)
			}
			t.claims[attemptKey(e)] = e.At
		case e.From == "running" && (e.To == "succeeded" || e.To == "failed" || e.To == "retrying"):
			b := e.At.UnixNano() / int64(rateBucket)
			agg := t.buckets[b]
			if agg == nil {
				agg = &rateAgg{}
				t.buckets[b] = agg
			}
			agg.done++
			k := attemptKey(e)
			if c, ok := t.claims[k]; ok {
				delete(t.claims, k)
				if d := e.At.Sub(c); d >= 0 {
					agg.latSum += d
					agg.latN++
					agg.latMax = max(agg.latMax, d)
				}
			}
		}
	}
	oldest := now.UnixNano()/int64(rateBucket) - rateBuckets
	for b := range t.buckets {
		if b <= oldest {
			delete(t.buckets, b)
		}
	}
}

// series returns the last n complete buckets before now (the one now is
// in is still filling): completions and the mean latency in milliseconds
// (0 when none was measured).
func (t *throughput) series(now time.Time, n int) (done, latMS []int, lastLat, maxLat time.Duration, peak int) {
	cur := now.UnixNano()/int64(rateBucket) - 1
	done, latMS = make([]int, n), make([]int, n)
	for i := range n {
		agg := t.buckets[cur-int64(n-1-i)]
		if agg == nil {
			continue
		}
		done[i] = agg.done
		peak = max(peak, agg.done)
		if agg.latN > 0 {
			mean := agg.latSum / time.Duration(agg.latN)
			latMS[i] = max(1, int(mean/time.Millisecond))
			lastLat = mean
			maxLat = max(maxLat, agg.latMax)
		}
	}
	return done, latMS, lastLat, maxLat, peak
}

// rateView is the throughput section of the cluster screen.
func (m *clusterModel) rateView() string {
	st, now := m.Styles, m.Now()
	n := min(rateBuckets, max(m.Width-40, 10))
	done, lat, lastLat, maxLat, peak := m.rate.series(now, n)
	perS := func(c int) string { return fmt.Sprintf("%.1f/s", float64(c)/rateBucket.Seconds()) }
	title := st.Title.Render("Throughput") + st.Subtle.Render(fmt.Sprintf("  (attempts ended, from the event stream; %ds buckets, last %s)",
		int(rateBucket.Seconds()), human(time.Duration(n)*rateBucket)))
	zero := "·"
	if st.ASCII {
		zero = "_"
	}
	spark := func(vals []int) string { // an empty bucket is a dot, not a gap
		return st.Key.Render(strings.ReplaceAll(st.Sparkline(vals), " ", zero))
	}
	line1 := "  tasks/s   " + spark(done) + "  now " + perS(done[len(done)-1]) + " · peak " + perS(peak)
	line2 := "  latency   " + spark(lat) + "  claim→end "
	if lastLat > 0 {
		line2 += human(lastLat) + " · max " + human(maxLat)
	} else {
		line2 += "-"
	}
	return fit(title, m.Width) + "\n" + fit(line1, m.Width) + "\n" + fit(line2, m.Width)
}
