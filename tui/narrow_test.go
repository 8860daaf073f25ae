package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// The run detail, queues and runs screens at 80x24 and 160x45: narrow
// terminals drop low-value columns first instead of cutting the duration
// and the worker; a task stopped by a revert stops counting; the
// timeline has milliseconds; STARTED is an age that says "ago"; the
// :submit dialog goes on with enter.

var revertedRunID = runID(18)

// addRevertedRun: a saga reverted while its charge was running. The
// charge's attempt was revoked, so it has no finished_at.
func addRevertedRun(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start := t0.Add(6 * time.Minute)
	r := rpc.Run{ID: revertedRunID, Workflow: "saga", State: domain.RunReverted, OnFailure: "revert", CreatedAt: start,
		StartedAt: start, FinishedAt: start.Add(30 * time.Second), TaskCount: 3, Done: 3, Reason: "reverted by ops"}
	f.runs = append([]rpc.Run{r}, f.runs...)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	f.tasks[r.ID] = []rpc.Task{
		{ID: r.ID + "/reserve-inventory", RunID: r.ID, Key: "reserve-inventory", Type: "echo", Queue: "default", State: domain.TaskReverted,
			Attempt: 1, MaxAttempts: 3, Worker: "dev-worker-1", StartedAt: at(1000), FinishedAt: at(3500), Deps: []string{}},
		{ID: r.ID + "/charge", RunID: r.ID, Key: "charge", Type: "http", Queue: "payments", State: domain.TaskReverted,
			Attempt: 2, MaxAttempts: 3, Worker: "dev-worker-2", StartedAt: at(4000), Deps: []string{"reserve-inventory"}},
		{ID: r.ID + "/ship", RunID: r.ID, Key: "ship", Type: "echo", Queue: "default", State: domain.TaskCancelled,
			MaxAttempts: 3, Deps: []string{"charge"}},
	}
	ev := func(idx uint64, ms int, key, tr, from, to, worker string) rpc.Event {
		e := rpc.Event{Index: idx, Kind: "task", RunID: r.ID, TaskKey: key, Transition: tr, From: from, To: to, Worker: worker, At: at(ms)}
		if key == "" {
			e.Kind = "run"
		}
		return e
	}
	f.events = append(f.events,
		ev(1100, 0, "", "start", "pending", "running", ""),
		ev(1101, 1000, "reserve-inventory", "claim", "ready", "running", "dev-worker-1"),
		ev(1102, 3500, "reserve-inventory", "succeed", "running", "succeeded", ""),
		ev(1103, 4250, "charge", "claim", "ready", "running", "dev-worker-2"),
		ev(1104, 12125, "", "revert", "running", "reverting", ""),
		ev(1104, 12125, "charge", "revert", "running", "reverting", ""),
		ev(1105, 20000, "charge", "reverted", "reverting", "reverted", ""),
		ev(1106, 29750, "reserve-inventory", "reverted", "reverting", "reverted", ""),
		ev(1107, 30000, "", "reverted", "reverting", "reverted", ""),
	)
	f.events[len(f.events)-4].Seq = 1
}

func openRun(t *testing.T, w, h int, id string, want ...string) (*teatest.TestModel, *fakeClient) {
	t.Helper()
	tm, f := startSized(t, w, h, addRevertedRun)
	keys(tm, ":")
	tm.Type("run " + shortID(id))
	keys(tm, "enter")
	waitFor(t, tm, append([]string{"Run " + id}, want...)...)
	return tm, f
}

func testRevertedTasks(t *testing.T, w, h int) {
	tm, _ := openRun(t, w, h, revertedRunID, "dev-worker-2")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	charge := lineWith(v, "charge")
	for _, want := range []string{"dev-worker-2", "8.1s", "⟲ reverted"} {
		if !strings.Contains(charge, want) {
			t.Errorf("the charge row lacks %q (its duration stops where the revert revoked it): %q", want, charge)
		}
	}
	if !strings.Contains(lineWith(v, "reserve-inventory"), "dev-worker-1") || !strings.Contains(v, "DURATION") {
		t.Errorf("a column the table needs was cut:\n%s", v)
	}
}

func TestRevertedTasks80x24(t *testing.T)  { testRevertedTasks(t, 80, 24) }
func TestRevertedTasks160x45(t *testing.T) { testRevertedTasks(t, 160, 45) }

func testTimelineMillis(t *testing.T, w, h int) {
	tm, _ := openRun(t, w, h, revertedRunID, "dev-worker-2")
	keys(tm, "tab", "tab")
	waitFor(t, tm, "[Timeline]", "12:06:04.250")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	if !strings.Contains(v, "12:06:12.125") {
		t.Errorf("the timeline lacks milliseconds:\n%s", v)
	}
}

func TestTimelineMillis80x24(t *testing.T)  { testTimelineMillis(t, 80, 24) }
func TestTimelineMillis160x45(t *testing.T) { testTimelineMillis(t, 160, 45) }

func testQueuesColumns(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, nil)
	keys(tm, "4")
	waitFor(t, tm, "reports", "half-open")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	for _, want := range []string{"OLDEST", "RATE", "1m35s", "◌ half-open sleep"} {
		if !strings.Contains(v, want) {
			t.Errorf("the queues screen at %dx%d lacks %q:\n%s", w, h, want, v)
		}
	}
}

func TestQueuesColumns80x24(t *testing.T)  { testQueuesColumns(t, 80, 24) }
func TestQueuesColumns160x45(t *testing.T) { testQueuesColumns(t, 160, 45) }

// STARTED (shown from 100 columns on) is an age that says so.
func TestRunsStarted160x45(t *testing.T) {
	tm, _ := startSized(t, 160, 45, nil)
	v := requireGolden(t, tm)
	requireFits(t, v, 160, 45)
	if line := lineWith(v, shortID(runID(12))); !strings.Contains(line, "3m59s ago") {
		t.Errorf("STARTED is not an age with ago: %q", line)
	}
}

// The :submit dialog focuses Yes: enter submits.
func TestSubmitEnterSubmits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hello.yaml")
	if err := os.WriteFile(path, []byte("name: hello\ntasks:\n  - key: greet\n    type: echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm, f := startSized(t, 80, 24, nil)
	keys(tm, ":")
	tm.Type("submit " + path + ` {"who":"ops"}`)
	keys(tm, "enter")
	waitFor(t, tm, "Submit workflow hello?", "›[ Yes ]")
	keys(tm, "enter")
	waitFor(t, tm, "hello  ○ pending")
	finish(t, tm)
	if got := f.called(); len(got) != 1 || !strings.HasPrefix(got[0], "submit hello") {
		t.Fatalf("calls = %v", got)
	}
}
