package fsm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of finally tasks (V2, apply_finally.go).

func finallyInput(t *testing.T, c Claimed) domain.FinallyInput {
	t.Helper()
	var in struct {
		Outcome domain.FinallyOutcome `json:"outcome"`
		Input   json.RawMessage       `json:"input"`
	}
	if err := json.Unmarshal(c.Input, &in); err != nil {
		t.Fatalf("finally input %s: %v", c.Input, err)
	}
	return domain.FinallyInput{Outcome: in.Outcome, Input: string(in.Input)}
}

const withFinally = `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}],
 "finally":[{"key":"cleanup","type":"fin","input":{"bucket":"x"}},{"key":"notify","type":"fin","deps":["cleanup"]}]}`

// After success: the finally tasks run (in their own order) with the
// outcome in their input; the run stays running until they settle, and
// their failure does not change the body's outcome.
func TestFinallyAfterSuccess(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", withFinally)
	h.wantNoClaim("w", "fin") // held until the body is over
	h.forward("w", "a", "b")
	h.wantRun("r", domain.RunRunning)
	c := h.claim("w", 1, "fin")[0]
	in := finallyInput(t, c)
	if c.TaskKey != "cleanup" || in.Outcome.State != domain.RunSucceeded || len(in.Outcome.Failed) != 0 || in.Input != `{"bucket":"x"}` {
		t.Fatalf("cleanup claim %+v input %+v", c, in)
	}
	h.complete(c, `1`)
	n := h.claim("w", 1, "fin")[0]
	h.fail(n, "mail server down", false)
	h.wantRun("r", domain.RunSucceeded) // the body's outcome
	h.wantTasks("r", map[string]domain.TaskState{"notify": domain.TaskFailed})
	if !hasTransition(runEvents(h, "r"), "run", "", "finally") {
		t.Fatal("no finally event")
	}
}

// After a failure: the body's waiting tasks are cancelled, the finally
// tasks see the failed tasks, and the run ends failed.
func TestFinallyAfterFailure(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", withFinally)
	h.fail(h.claim("w", 1, "t")[0], "boom", false)
	h.wantRun("r", domain.RunRunning)
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskCancelled})
	c := h.claim("w", 1, "fin")[0]
	if in := finallyInput(t, c); in.Outcome.State != domain.RunFailed || strings.Join(in.Outcome.Failed, ",") != "a" {
		t.Fatalf("outcome %+v", in.Outcome)
	}
	h.complete(c, `1`)
	h.complete(h.claim("w", 1, "fin")[0], `1`)
	h.wantRun("r", domain.RunFailed)
}

// With on_failure revert, the finally tasks run after the revert has
// finished (the run reverting meanwhile), see it, retry like any task, and
// the run ends reverted.
func TestFinallyAfterRevert(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"on_failure":"revert","tasks":[{"key":"a","type":"t","revert_type":"undo"},{"key":"b","type":"t","deps":["a"]}],
	 "finally":[{"key":"report","type":"fin","retry":{"max_attempts":2,"initial_backoff_ms":10}}]}`)
	h.forward("w", "a")
	h.fail(h.claim("w", 1, "t")[0], "boom", false)
	h.wantRun("r", domain.RunReverting)
	h.wantNoClaim("w", "fin") // not before the revert finished
	h.complete(h.claim("w", 1, "undo")[0], `1`)
	h.wantRun("r", domain.RunReverting)
	c := h.claim("w", 1, "fin")[0]
	if in := finallyInput(t, c); in.Outcome.State != domain.RunReverted {
		t.Fatalf("outcome %+v", in.Outcome)
	}
	h.fail(c, "flaky", true)
	h.wantTasks("r", map[string]domain.TaskState{"report": domain.TaskRetrying})
	h.now += 1000
	h.ok(&Tick{})
	h.complete(h.claim("w", 1, "fin")[0], `1`)
	h.wantRun("r", domain.RunReverted)
}

// A cancel stops the finally tasks with the rest; a retry of the run runs
// them again after the body.
func TestFinallyCancelAndRetry(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", withFinally)
	h.forward("w", "a", "b")
	h.claim("w", 1, "fin")
	h.verb(MsgCancelRun, "r")
	h.wantRun("r", domain.RunCancelled)
	h.wantTasks("r", map[string]domain.TaskState{"cleanup": domain.TaskCancelled, "notify": domain.TaskCancelled})
	res, err := h.retry("r", "")
	if err != nil || strings.Join(res.Tasks, ",") != "cleanup,notify" {
		t.Fatalf("retry: %+v %v", res, err)
	}
	// The body is over (succeeded): the finally tasks start at once.
	c := h.claim("w", 1, "fin")[0]
	if in := finallyInput(t, c); in.Outcome.State != domain.RunSucceeded || in.Input != `{"bucket":"x"}` {
		t.Fatalf("after retry: %+v", in)
	}
	h.complete(c, `1`)
	h.complete(h.claim("w", 1, "fin")[0], `1`)
	h.wantRun("r", domain.RunSucceeded)
}

// Finally tasks are validated: their deps stay among them, their keys are
// not the body's, they have no rules; below V2 they are refused.
func TestFinallyValidation(t *testing.T) {
	_, err := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"t"}],"finally":[{"key":"a","type":"t"},{"key":"c","type":"t","deps":["a2"],"when":"true"}]}`), domain.DefaultLimits)
	var se *domain.SpecError
	if !errors.As(err, &se) {
		t.Fatalf("got %v", err)
	}
	paths := []string{}
	for _, p := range se.Problems {
		paths = append(paths, p.Path)
	}
	if got := strings.Join(paths, " "); !strings.Contains(got, "finally[0].key") || !strings.Contains(got, "finally[1].deps[0]") || !strings.Contains(got, "finally[1].when") {
		t.Fatalf("problems %v", se.Problems)
	}
}

// After a revert, the outcome names the tasks that had failed before it.
func TestFinallyOutcomeNamesFailedTasksAfterRevert(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"on_failure":"revert","tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}],"finally":[{"key":"f","type":"fin"}]}`)
	h.forward("w", "a")
	h.fail(h.claim("w", 1, "t")[0], "boom", false)
	c := h.claim("w", 1, "fin")[0]
	if in := finallyInput(t, c); in.Outcome.State != domain.RunReverted || strings.Join(in.Outcome.Failed, ",") != "b" {
		t.Fatalf("outcome %+v", in.Outcome)
	}
}

// Finally tasks are decided like tasks with rules: a finally task whose
// finally dependency failed is skipped, and the run still ends, with the
// body's outcome.
func TestFinallyChainAfterItsOwnFailure(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", withFinally)
	h.forward("w", "a", "b")
	h.fail(h.claim("w", 1, "fin")[0], "cleanup broke", false)
	h.wantTasks("r", map[string]domain.TaskState{"cleanup": domain.TaskFailed, "notify": domain.TaskSkipped})
	h.wantRun("r", domain.RunSucceeded)
}
