package raftnode

import (
	"testing"

	"github.com/flowd/flowd/fsm"
)

func ended(queue string, claimed, at int64, outcome string) fsm.Event {
	return fsm.Event{Kind: "task", Queue: queue, Since: claimed, At: at, Outcome: outcome}
}

func TestAutoWindowStats(t *testing.T) {
	var w autoWindow
	w.observe([]fsm.Event{ended("q", 0, 100, fsm.OutcomeSucceeded)})
	if n, _ := w.stats("q", 0); n != 0 {
		t.Fatalf("observed %d samples while off", n)
	}
	w.track([]string{"q"})
	var evs []fsm.Event
	for i := range int64(10) {
		evs = append(evs, ended("q", 1000, 1000+10*(i+1), fsm.OutcomeSucceeded)) // 10..100 ms
	}
	evs = append(evs,
		ended("other", 1000, 5000, fsm.OutcomeSucceeded), // not auto
		ended("q", 1000, 9000, fsm.OutcomeCancelled),     // not a latency
		fsm.Event{Kind: "queue", Queue: "q", At: 9000},   // not a task
		ended("q", 0, 9000, fsm.OutcomeSucceeded))        // no claim time
	w.observe(evs)
	if n, p90 := w.stats("q", 0); n != 10 || p90 != 90 {
		t.Fatalf("stats %d samples p90 %d, want 10 and 90", n, p90)
	}
	if n, _ := w.stats("q", 1060); n != 5 {
		t.Fatalf("samples ended since 1060: %d, want 5", n)
	}
	// After a change only attempts claimed since count.
	w.changed("q", 1500)
	if n, _ := w.stats("q", 0); n != 0 {
		t.Fatalf("%d samples claimed before the change still count", n)
	}
	w.observe([]fsm.Event{ended("q", 1500, 1700, fsm.OutcomeFailed)})
	if n, p90 := w.stats("q", 0); n != 1 || p90 != 200 {
		t.Fatalf("after the change: %d samples p90 %d, want 1 and 200", n, p90)
	}
	// The ring keeps the newest autoSamplesPerQueue.
	for i := range int64(2 * autoSamplesPerQueue) {
		w.observe([]fsm.Event{ended("q", 2000, 2000+i, fsm.OutcomeSucceeded)})
	}
	if n, _ := w.stats("q", 0); n != autoSamplesPerQueue {
		t.Fatalf("%d samples kept, want %d", n, autoSamplesPerQueue)
	}
	if n, _ := w.stats("q", 2000+autoSamplesPerQueue); n != autoSamplesPerQueue {
		t.Fatalf("the ring lost the newest samples: %d since the oldest kept", n)
	}
	// Untracked queues are forgotten; no queue turns observing off.
	w.track(nil)
	if w.on.Load() {
		t.Fatal("still observing with no auto queue")
	}
	if n, _ := w.stats("q", 0); n != 0 {
		t.Fatal("a forgotten queue kept its samples")
	}
}
