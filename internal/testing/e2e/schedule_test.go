package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/schedrpc"
)

// An @every 1s schedule fires exactly once per second across a kill -9 of
// the leader: counted from the replicated event stream, no fire time
// appears twice and none is missing (the outage is well inside the default
// one-minute catch-up window, so every missed second runs once, late).
func TestScheduleFiresOncePerSecondAcrossLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := schedrpc.Create(ctx, cl, schedrpc.CreateParams{ID: "tick", Cron: "@every 1s", Overlap: "allow",
		Workflow: json.RawMessage(`{"name":"tick","tasks":[{"key":"a","type":"echo"}]}`)}); err != nil {
		t.Fatal(err)
	}
	waitFires := func(n uint64) *schedrpc.Schedule {
		t.Helper()
		for {
			s, err := schedrpc.Get(ctx, cl, "tick", 1)
			if err == nil && s.Fires >= n {
				return s
			}
			select {
			case <-ctx.Done():
				t.Fatalf("fewer than %d fires: %+v %v", n, s, err)
			case <-time.After(100 * time.Millisecond): // polling external processes
			}
		}
	}
	waitFires(3)
	leader := c.waitLeader()
	c.kill9(leader)
	c.waitLeader(leader)
	before := waitFires(0).Fires
	waitFires(before + 3)

	// Every fire event of the schedule, from a survivor's replicated
	// window, read after its counters (so the events cover them).
	survivor := c.followers(leader)[0]
	sc := c.client(survivor)
	end, err := schedrpc.Get(ctx, sc, "tick", 1)
	if err != nil {
		t.Fatal(err)
	}
	var fires []time.Time
	seen := map[string]bool{}
	runs := map[string]bool{}
	var missed int
	for from := uint64(0); ; {
		page, err := sc.EventsList(ctx, rpc.EventsListParams{FromIndex: from, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			break
		}
		for _, ev := range page.Events {
			if ev.Kind != "schedule" || ev.Name != "tick" {
				continue
			}
			switch ev.Transition {
			case "fire":
				if seen[ev.From] {
					t.Fatalf("fire time %s fired twice", ev.From)
				}
				seen[ev.From] = true
				at, err := time.Parse(time.RFC3339Nano, ev.From)
				if err != nil {
					t.Fatal(err)
				}
				if ev.At.Before(at) {
					t.Fatalf("fire %s applied early, at %s", ev.From, ev.At)
				}
				if ev.To != "started" || runs[ev.RunID] {
					t.Fatalf("fire %s: outcome %s run %s (seen %v)", ev.From, ev.To, ev.RunID, runs[ev.RunID])
				}
				runs[ev.RunID] = true
				fires = append(fires, at)
			case "missed":
				missed++
			}
		}
		from = page.Events[len(page.Events)-1].Index + 1
	}
	if missed != 0 || end.Missed != 0 {
		t.Fatalf("%d missed events (%d missed fires) inside the catch-up window", missed, end.Missed)
	}
	slices.SortFunc(fires, func(a, b time.Time) int { return a.Compare(b) })
	if uint64(len(fires)) < end.Fires {
		t.Fatalf("%d fire events for %d fires", len(fires), end.Fires)
	}
	for i := 1; i < len(fires); i++ {
		if d := fires[i].Sub(fires[i-1]); d != time.Second {
			t.Fatalf("fires %s and %s are %s apart (want 1s: no gap, no duplicate)", fires[i-1], fires[i], d)
		}
	}
	if s := end; s.Started != s.Fires || s.Skipped != 0 {
		t.Fatalf("counters: %+v", s)
	}
	t.Logf("%d fires, one per second, across the kill of %s", len(fires), leader.id)
}
