package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of run.retry (V2, apply_retry.go).

func (h *harness) retry(id, task string) (*RetryResult, error) {
	h.t.Helper()
	switch res := h.apply(&RunRetry{ID: id, Task: task}).(type) {
	case *RetryResult:
		return res, nil
	case error:
		return nil, res
	default:
		h.t.Fatalf("retry: %#v", res)
		return nil, nil
	}
}

// A failed run is retried in place: the failed task and the tasks the
// failure cancelled go back to pending, the task that succeeded is not
// run again, the failed task's attempts stay in its history (numbers go
// on) and its retry policy starts afresh; the run succeeds.
func TestRetryRerunsOnlyTheFailedPart(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"],"retry":{"max_attempts":2,"initial_backoff_ms":10}},
	 {"key":"c","type":"t","deps":["b"]},{"key":"side","type":"u"}]}`)
	h.forward("w", "a")
	h.fail(h.claim("w", 1, "t")[0], "one", false)
	h.wantRun("r", domain.RunFailed)
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskFailed, "c": domain.TaskCancelled, "side": domain.TaskCancelled})
	res, err := h.retry("r", "")
	if err != nil || res.State != domain.RunRunning || strings.Join(res.Tasks, ",") != "b,c,side" {
		t.Fatalf("retry: %+v %v", res, err)
	}
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskSucceeded, "b": domain.TaskReady, "c": domain.TaskPending, "side": domain.TaskReady})
	// A retryable failure is retried: the policy counts attempts after the retry.
	c := h.claim("w", 1, "t")[0]
	if c.TaskKey != "b" || c.Attempt != 2 {
		t.Fatalf("claim after retry: %+v", c)
	}
	h.fail(c, "two", true)
	if tk := h.task("r", "b"); tk.State != domain.TaskRetrying || len(tk.Attempts) != 2 {
		t.Fatalf("b after a retryable failure: %+v", tk)
	}
	h.now += 10_000
	h.ok(&Tick{})
	for _, k := range []string{"b", "c"} {
		if c := h.claim("w", 1, "t")[0]; c.TaskKey != k || !h.complete(c, `1`) {
			t.Fatalf("claimed %s, want %s", c.TaskKey, k)
		}
	}
	h.complete(h.claim("w", 1, "u")[0], `1`)
	h.wantRun("r", domain.RunSucceeded)
	if tk := h.task("r", "b"); tk.Attempt != 3 || len(tk.Attempts) != 3 || tk.Attempts[0].Error != "one" {
		t.Fatalf("history: %+v", tk.Attempts)
	}
	if !hasTransition(runEvents(h, "r"), "run", "", domain.EdgeRetry) || !hasTransition(runEvents(h, "r"), "task", "b", domain.EdgeReset) {
		t.Fatal("no retry/reset events")
	}
}

// run.retry is refused while the run is active, on a succeeded or reverted
// run, for a task that did not fail, and (in a run without rules) for one
// task while another failed task would fail the run again.
func TestRetryRefusals(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t"}]}`)
	if _, err := h.retry("r", ""); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "has not ended") {
		t.Fatalf("active run: %v", err)
	}
	both := h.claim("w", 2)
	h.fail(both[0], "x", false)
	h.fail(both[1], "y", false) // a straggler of the failed run: its failure is kept
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskFailed, "b": domain.TaskFailed})
	if _, err := h.retry("r", "a"); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "other failed tasks (b)") {
		t.Fatalf("one of two failed: %v", err)
	}
	if _, err := h.retry("nope", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if _, err := h.retry("r", "zz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
	h.submit("ok", `{"tasks":[{"key":"a","type":"t"}]}`)
	h.forward("w", "a")
	if _, err := h.retry("ok", ""); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "nothing failed") {
		t.Fatalf("succeeded run: %v", err)
	}
}

// A cancelled run is retried: its cancelled tasks run again.
func TestRetryCancelledRun(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"deadline_ms":1000,"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)
	c := h.claimOne("w")
	h.verb(MsgCancelRun, "r")
	h.wantRun("r", domain.RunCancelled)
	if h.complete(c, `1`) {
		t.Fatal("the cancelled lease completed")
	}
	h.now += 5000 // the old deadline passed: the retry gives a new one
	if res, err := h.retry("r", ""); err != nil || res.State != domain.RunRunning {
		t.Fatalf("retry: %+v %v", res, err)
	}
	h.ok(&Tick{})
	h.forward("w", "a", "b")
	h.wantRun("r", domain.RunSucceeded)
}

// In a run with rules, one failed task is retried with --task while the
// tasks its failure skipped are decided again.
func TestRetryOneTaskOfADecidedRun(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"tasks":[{"key":"a","type":"a"},{"key":"b","type":"b"},
	 {"key":"after-a","type":"t","deps":["a"]},{"key":"notify","type":"t","deps":["a","b"],"trigger":"one_failed"}]}`, "", nil)
	h.fail(h.claim("w", 1, "a")[0], "x", false)
	h.fail(h.claim("w", 1, "b")[0], "y", false)
	h.forward("w", "notify")
	h.wantRun("r", domain.RunFailed)
	res, err := h.retry("r", "a")
	if err != nil || strings.Join(res.Tasks, ",") != "a,after-a" {
		t.Fatalf("retry a: %+v %v", res, err)
	}
	h.complete(h.claim("w", 1, "a")[0], `1`)
	h.forward("w", "after-a")
	h.wantRun("r", domain.RunFailed) // b still failed
	h.wantTasks("r", map[string]domain.TaskState{"notify": domain.TaskSucceeded, "b": domain.TaskFailed})
}

// Below V2 run.retry is refused on every replica alike.
func TestRetryNeedsV2(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"}]}`)
	h.fail(h.claimOne("w"), "x", false)
	if _, err := h.retry("r", ""); !errors.Is(err, ErrNeedsVersion) {
		t.Fatalf("retry at V1: %v", err)
	}
}
