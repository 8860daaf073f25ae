package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// rateEvents are claim and end events of task attempts over the last two
// minutes before fixedNow: more tasks, and slower ones, towards now.
func rateEvents() []rpc.Event {
	var evs []rpc.Event
	idx := uint64(3000)
	for s := 120; s > 0; s -= 5 {
		n := (125 - s) / 20 // 0..6 per bucket
		for j := range n {
			at := fixedNow().Add(-time.Duration(s) * time.Second)
			key := fmt.Sprintf("t%d-%d", s, j)
			lat := time.Duration(200*(125-s)/5) * time.Millisecond
			to := "succeeded"
			if j == 0 && s%40 == 0 {
				to = "failed"
			}
			evs = append(evs,
				rpc.Event{Index: idx, Kind: "task", RunID: runID(12), TaskKey: key, Transition: "claim", From: "ready", To: "running", Attempt: 1, At: at.Add(-lat)},
				rpc.Event{Index: idx + 1, Kind: "task", RunID: runID(12), TaskKey: key, Transition: "succeed", From: "running", To: to, Attempt: 1, At: at})
			idx += 2
		}
	}
	slices.SortStableFunc(evs, func(a, b rpc.Event) int { return a.At.Compare(b.At) })
	return evs
}

func TestThroughputSeries(t *testing.T) {
	var r throughput
	now := fixedNow()
	r.add([]rpc.Event{
		{Kind: "task", RunID: "r", TaskKey: "a", Attempt: 1, From: "ready", To: "running", Transition: "claim", At: now.Add(-9 * time.Second)},
		{Kind: "task", RunID: "r", TaskKey: "a", Attempt: 1, From: "running", To: "succeeded", At: now.Add(-3 * time.Second)},
		{Kind: "task", RunID: "r", TaskKey: "b", Attempt: 2, From: "running", To: "retrying", At: now.Add(-3 * time.Second)},   // claim not seen
		{Kind: "task", RunID: "r", TaskKey: "c", Attempt: 1, From: "running", To: "succeeded", At: now.Add(-11 * time.Minute)}, // too old
		{Kind: "run", RunID: "r", From: "running", To: "succeeded", At: now},
	}, now)
	done, lat, last, maxLat, peak := r.series(now, 3)
	if !slices.Equal(done, []int{0, 0, 2}) || !slices.Equal(lat, []int{0, 0, 6000}) {
		t.Fatalf("done %v lat %v", done, lat)
	}
	if last != 6*time.Second || maxLat != 6*time.Second || peak != 2 {
		t.Fatalf("last %v max %v peak %d", last, maxLat, peak)
	}
	if len(r.buckets) != 1 || len(r.claims) != 0 {
		t.Fatalf("kept %d buckets, %d claims", len(r.buckets), len(r.claims))
	}
}

func testClusterRate(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, nil)
	tm.Send(eventsMsg{Events: rateEvents()})
	keys(tm, "6")
	waitFor(t, tm, "Throughput", "claim→end 4.8s", "peak 1.2/s")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, "█") {
		t.Error("no full bar in the sparkline")
	}
}

func TestClusterThroughput80x24(t *testing.T)  { testClusterRate(t, 80, 24) }
func TestClusterThroughput160x45(t *testing.T) { testClusterRate(t, 160, 45) }

// The backfill counts only what the stream has not delivered.
func TestThroughputBackfillCountsOnce(t *testing.T) {
	var r throughput
	now := fixedNow()
	end := func(idx uint64, key string) rpc.Event {
		return rpc.Event{Index: idx, Kind: "task", RunID: "r", TaskKey: key, Attempt: 1, From: "running", To: "succeeded", At: now.Add(-2 * time.Second)}
	}
	r.stream([]rpc.Event{end(12, "c"), end(11, "b")}, now)
	r.backfill([]rpc.Event{end(9, "a"), end(11, "b"), end(12, "c")}, now) // b and c came by the stream
	if done, _, _, _, _ := r.series(now, 1); done[0] != 3 {
		t.Fatalf("counted %d, want 3", done[0])
	}
}
