package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
)

// A for_each over a 20-element list runs 20 element tasks, at most
// max_parallel (3) at a time by the worker's journal, and the fan-in
// receives the 20 results in order (examples/workflows/foreach.yaml).
func TestForEachWithRealAgents(t *testing.T) {
	c := startCluster(t, 3)
	c.waitNewest()
	cl := c.client()
	w := startWorker(t, c, "wl") // 4 slots: the cap, not the worker, limits
	id := submit(t, cl, workflow(t, "foreach.yaml"))
	if r := waitRun(t, cl, id, 60*time.Second); r.State != domain.RunSucceeded || r.TaskCount != 23 {
		t.Fatalf("run %s with %d tasks", r.State, r.TaskCount)
	}
	var total struct {
		Count   int   `json:"count"`
		Sum     int   `json:"sum"`
		Squares []int `json:"squares"`
	}
	if err := json.Unmarshal(task(t, cl, id+"/total").Result, &total); err != nil || total.Count != 20 || total.Sum != 2470 {
		t.Fatalf("total: %+v %v", total, err)
	}
	for i, s := range total.Squares {
		if s != i*i {
			t.Fatalf("results out of order: %v", total.Squares)
		}
	}
	running, most := 0, 0
	for _, l := range w.lines() {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "square-item" {
			continue
		}
		switch f[0] {
		case "call":
			running++
			most = max(most, running)
		case "done", "failed", "cancelled":
			running--
		}
	}
	if most > 3 || most == 0 {
		t.Fatalf("at most %d element tasks ran at once, want 1-3 (max_parallel 3)", most)
	}
}
