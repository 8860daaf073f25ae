package tui

import (
	"testing"

	"github.com/flowd/flowd/rpc"
)

// The run view says why a run waits (run.get waiting_on) and the command
// that lifts it.
func TestRunDetailWaitingOn(t *testing.T) {
	tm, f := start(t)
	f.mu.Lock()
	for i := range f.runs {
		if f.runs[i].ID == runID(12) {
			f.runs[i].WaitingOn = []rpc.WaitingOn{{Reason: "queue_paused", Message: "queue q is paused", Command: "flowd queue resume q"}}
		}
	}
	f.mu.Unlock()
	keys(tm, "enter")
	waitFor(t, tm, "Run "+runID(12), "waiting: queue q is paused (lift: flowd queue resume q)")
}
