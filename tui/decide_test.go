package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// A run that decided: a branch skipped by its condition (and its dependent
// by the default trigger rule), a one_failed notifier that ran, and a
// finally task. The skipped state renders with its glyph in the graph at
// both sizes.

var decideRunID = runID(14)

func addDecideRun(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := rpc.Run{ID: decideRunID, Workflow: "decide", State: domain.RunRunning, CreatedAt: t0.Add(8 * time.Minute),
		StartedAt: t0.Add(8*time.Minute + time.Second), TaskCount: 7, Done: 6}
	f.runs = append([]rpc.Run{r}, f.runs...)
	type node struct {
		key, typ string
		state    domain.TaskState
		deps     []string
		err      string
		finally  bool
	}
	for _, n := range []node{
		{"build", "echo", domain.TaskSucceeded, nil, "", false},
		{"deploy-prod", "echo", domain.TaskSkipped, []string{"build"}, "skipped: when is false: input.env == 'prod'", false},
		{"announce", "echo", domain.TaskSkipped, []string{"deploy-prod"}, "skipped: trigger all_succeeded not met", false},
		{"smoke-test", "ship", domain.TaskFailed, []string{"build"}, "carrier rejected", false},
		{"page-oncall", "report", domain.TaskSucceeded, []string{"smoke-test"}, "", false},
		{"cleanup", "echo", domain.TaskSucceeded, []string{"announce", "page-oncall"}, "", false},
		{"report", "echo", domain.TaskRunning, nil, "", true},
	} {
		f.tasks[r.ID] = append(f.tasks[r.ID], rpc.Task{ID: r.ID + "/" + n.key, RunID: r.ID, Key: n.key, Type: n.typ,
			Queue: "default", State: n.state, Deps: n.deps, Error: n.err, MaxAttempts: 1, Finally: n.finally})
	}
}

func testDecideGraph(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addDecideRun)
	openGraph(t, tm, decideRunID, "[↷ deploy-prod]", "[↷ announce]")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, "✗ smoke-test") {
		t.Error("the failed branch is not drawn")
	}
}

func TestGraphSkipped80x24(t *testing.T)  { testDecideGraph(t, 80, 24) }
func TestGraphSkipped160x45(t *testing.T) { testDecideGraph(t, 160, 45) }

// A child run (started by a task of type run) shows its parent in its
// header: the link from child to parent.
var childRunID = runID(15)

func addChildRun(f *fakeClient) {
	addDecideRun(f)
	f.mu.Lock()
	defer f.mu.Unlock()
	r := rpc.Run{ID: childRunID, Workflow: "etl", State: domain.RunSucceeded, CreatedAt: t0.Add(9 * time.Minute),
		StartedAt: t0.Add(9*time.Minute + time.Second), FinishedAt: t0.Add(9*time.Minute + 3*time.Second),
		TaskCount: 2, Done: 2, ParentID: decideRunID, Labels: map[string]string{"flowd.parent_run": decideRunID, "flowd.parent_task": "deploy"}}
	f.runs = append([]rpc.Run{r}, f.runs...)
	for _, k := range []string{"extract", "load"} {
		f.tasks[r.ID] = append(f.tasks[r.ID], rpc.Task{ID: r.ID + "/" + k, RunID: r.ID, Key: k, Type: "echo",
			Queue: "default", State: domain.TaskSucceeded, MaxAttempts: 1})
	}
}

func testChildRunHeader(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addChildRun)
	openGraph(t, tm, childRunID, "[✓ extract]")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, "parent "+shortID(decideRunID)) && !strings.Contains(v, "parent "+decideRunID) {
		t.Error("the child run does not name its parent")
	}
}

func TestChildRunHeader80x24(t *testing.T)  { testChildRunHeader(t, 80, 24) }
func TestChildRunHeader160x45(t *testing.T) { testChildRunHeader(t, 160, 45) }

// Enter on a task that started a child run opens the child run.
func TestEnterOnRunTaskOpensChildRun(t *testing.T) {
	tm, _ := startSized(t, 160, 45, func(f *fakeClient) {
		addChildRun(f)
		f.mu.Lock()
		defer f.mu.Unlock()
		ts := f.tasks[decideRunID]
		for i := range ts {
			if ts[i].Key == "build" {
				ts[i].Type, ts[i].ChildRun = "run", childRunID
			}
		}
	})
	openGraph(t, tm, decideRunID, "›[✓ build]") // the first task is selected
	keys(tm, "enter")
	waitFor(t, tm, "Run "+childRunID, "parent "+shortID(decideRunID))
}
