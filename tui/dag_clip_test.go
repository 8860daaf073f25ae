package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A graph larger than the pane says what it clips: a row that goes on past
// the right (or came from the left) edge ends (starts) with an arrow, and
// the pane's last row counts the tasks beyond each edge.

var wideRunID = runID(14)

var wideChain = []string{"extract-customers", "validate-records", "normalize-addresses", "geocode-addresses",
	"dedupe-customers", "load-warehouse", "notify-analysts"}

// addWideRun adds a seven-task chain, far wider than 80 columns.
func addWideRun(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := rpc.Run{ID: wideRunID, Workflow: "etl-wide", State: domain.RunRunning, CreatedAt: t0.Add(8 * time.Minute),
		StartedAt: t0.Add(8*time.Minute + time.Second), TaskCount: len(wideChain), Done: 2}
	f.runs = append([]rpc.Run{r}, f.runs...)
	var tasks []rpc.Task
	for i, k := range wideChain {
		st, deps := domain.TaskPending, []string{}
		switch {
		case i < 2:
			st = domain.TaskSucceeded
		case i == 2:
			st = domain.TaskRunning
		}
		if i > 0 {
			deps = []string{wideChain[i-1]}
		}
		tasks = append(tasks, rpc.Task{ID: r.ID + "/" + k, RunID: r.ID, Key: k, Type: k, Queue: "default",
			State: st, Deps: deps, MaxAttempts: 1})
	}
	f.tasks[r.ID] = tasks
}

func graphLines(v string) []string {
	lines := strings.Split(v, "\n")
	for i, l := range lines {
		if strings.Contains(l, "[Graph]") {
			return lines[i+1 : len(lines)-1] // up to the footer
		}
	}
	return nil
}

func TestGraphWide80x24(t *testing.T) {
	tm, _ := startSized(t, 80, 24, addWideRun)
	openGraph(t, tm, wideRunID, "extract-customers", "more right")
	v := requireGolden(t, tm)
	requireFits(t, v, 80, 24)
	g := graphLines(v)
	if !strings.Contains(strings.Join(g, "\n"), "→") || strings.Contains(strings.Join(g, "\n"), "←") {
		t.Errorf("want a right marker and no left one:\n%s", strings.Join(g, "\n"))
	}
	if !strings.Contains(v, "→ 4 more right") {
		t.Errorf("the last row does not count the tasks to the right:\n%s", v)
	}
}

// At the chain's end the view has scrolled: the rows come from the left.
func TestGraphWideEnd80x24(t *testing.T) {
	tm, _ := startSized(t, 80, 24, addWideRun)
	openGraph(t, tm, wideRunID, "extract-customers")
	keys(tm, "G")
	waitFor(t, tm, "›[○ notify-analysts]", "more left")
	v := requireGolden(t, tm)
	requireFits(t, v, 80, 24)
	if g := strings.Join(graphLines(v), "\n"); !strings.Contains(g, "←") || strings.Contains(v, "more right") {
		t.Errorf("want a left marker and nothing to the right:\n%s", v)
	}
}

// A graph that fits has no marker row.
func TestGraphThatFitsHasNoMarkers(t *testing.T) {
	tm, _ := startSized(t, 160, 45, nil)
	openGraph(t, tm, runID(12), "[● load]")
	v := finish(t, tm)
	if strings.Contains(v, " more ") || strings.Contains(v, "→") {
		t.Errorf("markers on a graph that fits:\n%s", v)
	}
}
