package tui

import "testing"

// The run view says when a run waits for a task type no worker claims
// (run.get waiting_for_worker) and how to start one.
func TestRunDetailWaitingForWorker(t *testing.T) {
	tm, f := start(t)
	f.mu.Lock()
	for i := range f.runs {
		if f.runs[i].ID == runID(12) {
			f.runs[i].WaitingForWorker = []string{"enrich"}
		}
	}
	f.mu.Unlock()
	keys(tm, "enter")
	waitFor(t, tm, "Run "+runID(12), "waiting for a worker: no worker claims type enrich")
}
