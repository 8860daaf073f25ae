package tui

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/rpc"
)

// An auto queue's row marks its cap, and its detail line shows the bounds,
// the target and a sparkline of the caps the leader set (events and loads).
func TestQueuesScreenShowsAutoConcurrency(t *testing.T) {
	m := newQueues(Common{Width: 160, Height: 20, Styles: NewStyles(true), Keys: NewKeyMap(false), Now: fixedNow})
	load := func(cap int) {
		m, _ = m.Update(queuesLoadedMsg{res: &rpc.QueueListResult{Queues: []rpc.Queue{
			{Name: "aq", Ready: 40, Running: cap, Concurrency: cap, Auto: &rpc.QueueAuto{Min: 1, Max: 8, TargetLatencyMS: 250}},
			{Name: "fixed", Concurrency: 3},
		}}})
	}
	load(8)
	m, _ = m.Update(eventsMsg{Events: []rpc.Event{
		{Index: 10, Kind: "queue", Name: "aq", Queue: "aq", Transition: "decrease_concurrency", From: "8", To: "4", At: fixedNow()},
		{Index: 11, Kind: "queue", Name: "aq", Queue: "aq", Transition: "decrease_concurrency", From: "4", To: "2", At: fixedNow()},
		{Index: 12, Kind: "queue", Name: "aq", Queue: "aq", Transition: "increase_concurrency", From: "2", To: "3", At: fixedNow()},
	}})
	load(3)
	if got := m.caps["aq"]; len(got) != 4 || got[0] != 8 || got[3] != 3 {
		t.Fatalf("cap history %v, want [8 4 2 3]", got)
	}
	if _, ok := m.caps["fixed"]; ok {
		t.Fatal("a fixed queue got a cap history")
	}
	view := m.View()
	for _, want := range []string{"3~", "auto cap 3 (floor 1, ceiling 8, target 250ms)", "caps "} {
		if !strings.Contains(view, want) {
			t.Fatalf("view lacks %q:\n%s", want, view)
		}
	}
	if capCell(&m.queues[1]) != "3" || capCell(&rpc.Queue{}) != "∞" {
		t.Fatalf("cap cells of fixed and unlimited queues: %q %q", capCell(&m.queues[1]), capCell(&rpc.Queue{}))
	}
}
