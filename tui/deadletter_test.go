package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// The failed-tasks screen (9): what task.list with state failed answers,
// one-key retry in place of the selected task's run, and the retry of
// every failed run of its workflow behind a confirm dialog.

var (
	deadEtlRun     = runID(17) // etl, failed: load failed
	deadBillingRun = runID(16) // billing, failed: charge failed
	deadOldEtlRun  = runID(10) // etl, failed (newFake): load failed
)

func addDeadLetters(f *fakeClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mk := func(id, wf string, at time.Time) rpc.Run {
		return rpc.Run{ID: id, Workflow: wf, State: domain.RunFailed, CreatedAt: at, StartedAt: at.Add(time.Second),
			FinishedAt: at.Add(40 * time.Second), TaskCount: 2, Done: 2, Reason: "a task failed"}
	}
	f.runs = append([]rpc.Run{mk(deadEtlRun, "etl", t0.Add(7*time.Minute)), mk(deadBillingRun, "billing", t0.Add(4*time.Minute))}, f.runs...)
	task := func(run, key, typ, queue string, st domain.TaskState, attempt int, err string, end time.Time) rpc.Task {
		return rpc.Task{ID: run + "/" + key, RunID: run, Key: key, Type: typ, Queue: queue, State: st, Attempt: attempt,
			MaxAttempts: attempt, Error: err, StartedAt: end.Add(-3 * time.Second), FinishedAt: end, Deps: []string{}}
	}
	f.tasks[deadEtlRun] = []rpc.Task{
		task(deadEtlRun, "extract", "echo", "default", domain.TaskSucceeded, 1, "", t0.Add(7*time.Minute+10*time.Second)),
		task(deadEtlRun, "load", "flaky", "default", domain.TaskFailed, 3, "connection refused: postgres:5432", t0.Add(7*time.Minute+40*time.Second)),
	}
	f.tasks[deadBillingRun] = []rpc.Task{
		task(deadBillingRun, "charge", "http", "payments", domain.TaskFailed, 5,
			"card declined (HTTP 402): the issuer refused the charge for customer 4411; retrying will not help until the card is updated",
			t0.Add(4*time.Minute+40*time.Second)),
	}
	f.tasks[deadOldEtlRun] = []rpc.Task{
		task(deadOldEtlRun, "load", "flaky", "default", domain.TaskFailed, 3, "timeout after 30s", t0.Add(5*time.Minute+43*time.Second)),
	}
}

// TaskList serves task.list: the tasks of every run, newest run first,
// by key within a run (one page).
func (f *fakeClient) TaskList(_ context.Context, p rpc.TaskListParams) (*rpc.TaskListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := &rpc.TaskListResult{Tasks: []rpc.Task{}}
	for _, r := range f.runs {
		ts := slices.Clone(f.tasks[r.ID])
		slices.SortFunc(ts, func(a, b rpc.Task) int { return strings.Compare(a.Key, b.Key) })
		for _, t := range ts {
			if p.State == "" || t.State == p.State {
				res.Tasks = append(res.Tasks, t)
			}
		}
	}
	return res, nil
}

// RunRetry serves run.retry: the run's failed tasks (or the one named)
// go back to ready and the run to running.
func (f *fakeClient) RunRetry(_ context.Context, p rpc.RetryParams) (*rpc.RetryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("retry %s task=%s", p.ID, p.Task))
	r, err := f.find(p.ID)
	if err != nil {
		return nil, err
	}
	if r.State != domain.RunFailed && r.State != domain.RunCancelled {
		return nil, fmt.Errorf("%w: run %s is %s: only a failed or cancelled run is retried", domain.ErrInvalidArgument, shortID(r.ID), r.State)
	}
	res := &rpc.RetryResult{ID: r.ID, State: domain.RunRunning}
	for i, t := range f.tasks[r.ID] {
		if t.State == domain.TaskFailed && (p.Task == "" || p.Task == t.Key) {
			f.tasks[r.ID][i].State = domain.TaskReady
			res.Tasks = append(res.Tasks, t.Key)
		}
	}
	r.State, r.FinishedAt = domain.RunRunning, time.Time{}
	return res, nil
}

func testDeadLetters(t *testing.T, w, h int) {
	tm, _ := startSized(t, w, h, addDeadLetters)
	keys(tm, "9")
	waitFor(t, tm, "3 failed tasks in 3 runs", "connection refused")
	v := requireGolden(t, tm)
	requireFits(t, v, w, h)
	for _, want := range []string{"[9 Failed]", "› " + shortID(deadEtlRun), "task load of run " + deadEtlRun} {
		if !strings.Contains(v, want) {
			t.Errorf("the failed-tasks screen lacks %q", want)
		}
	}
}

func TestDeadLetters80x24(t *testing.T)  { testDeadLetters(t, 80, 24) }
func TestDeadLetters160x45(t *testing.T) { testDeadLetters(t, 160, 45) }

// r retries the selected task's run in place from that task, at once; the
// task leaves the list.
func TestDeadLetterRetryTask(t *testing.T) {
	tm, f := startSized(t, 120, 40, addDeadLetters)
	keys(tm, "9")
	waitFor(t, tm, "3 failed tasks in 3 runs")
	keys(tm, "j", "r") // the billing run's charge
	waitFor(t, tm, "run "+shortID(deadBillingRun)+" retried in place: charge again, now ● running", "2 failed tasks in 2 runs")
	v := finish(t, tm)
	if want := []string{"retry " + deadBillingRun + " task=charge"}; !slices.Equal(f.called(), want) {
		t.Fatalf("calls = %v, want %v", f.called(), want)
	}
	if strings.Contains(v, "card declined") {
		t.Errorf("the retried task is still listed:\n%s", v)
	}
}

// A retries every failed run of the selected task's workflow, after
// saying how many.
func TestDeadLetterRetryWorkflow(t *testing.T) {
	tm, f := startSized(t, 120, 40, addDeadLetters)
	keys(tm, "9")
	waitFor(t, tm, "3 failed tasks in 3 runs")
	keys(tm, "A")
	waitFor(t, tm, "Retry 2 failed runs of workflow etl?", shortID(deadEtlRun)+" "+shortID(deadOldEtlRun))
	keys(tm, "y")
	waitFor(t, tm, "workflow etl: 2 failed runs retried in place", "1 failed task in 1 run")
	finish(t, tm)
	want := []string{"retry " + deadEtlRun + " task=", "retry " + deadOldEtlRun + " task="}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

// Under --readonly the retry keys do nothing and the screen does not
// offer them.
func TestDeadLetterReadOnly(t *testing.T) {
	f := newFake()
	addDeadLetters(f)
	tm := teatest.NewTestModel(t, New(Config{Client: f, Prober: f, Endpoints: testEndpoints, Now: fixedNow, ReadOnly: true}),
		teatest.WithInitialTermSize(120, 40))
	t.Cleanup(func() { _ = tm.Quit() })
	tm.Send(connMsg{State: connLive, Endpoint: testEndpoints[0], Node: "n1"})
	keys(tm, "9")
	waitFor(t, tm, "3 failed tasks in 3 runs")
	keys(tm, "r", "A")
	v := finish(t, tm)
	if len(f.called()) != 0 || strings.Contains(v, "r retries") {
		t.Fatalf("calls = %v\n%s", f.called(), v)
	}
}
