package fsm

import (
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Interactions of the version-2 features with the verbs.

// A loop's elements are compensated before what the loop depends on.
func TestForEachElementsRevertBeforeTheirDependencies(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"on_failure":"revert","tasks":[{"key":"a","type":"t","revert_type":"undo"},
	 {"key":"sq","type":"sq","deps":["a"],"for_each":"input.items","revert_type":"undo"},
	 {"key":"last","type":"t","deps":["sq"]}]}`, `{"items":[1,2]}`, nil)
	h.forward("w", "a")
	for range 2 {
		h.complete(h.claim("w", 1, "sq")[0], `1`)
	}
	h.fail(h.claim("w", 1, "t")[0], "boom", false)
	h.wantRun("r", domain.RunReverting)
	first := h.claim("w", 10, "undo")
	if keys := claimKeys(first); len(keys) != 2 || keys[0] != "sq[0]" || keys[1] != "sq[1]" {
		t.Fatalf("first compensations %v, want the elements", keys)
	}
	for _, c := range first {
		h.complete(c, `1`)
	}
	if keys := claimKeys(h.claim("w", 10, "undo")); len(keys) != 1 || keys[0] != "a" {
		t.Fatalf("then %v, want a", keys)
	}
}

// Cancelling a run stops its sleep (no wake later); a retry sleeps again.
func TestSleepCancelledAndRetried(t *testing.T) {
	h := newSemV2(t)
	h.submit("r", `{"tasks":[{"key":"nap","type":"sleep","duration_ms":1000}]}`)
	h.verb(MsgCancelRun, "r")
	if tk := h.task("r", "nap"); tk.State != domain.TaskCancelled || tk.DueAt != 0 {
		t.Fatalf("cancelled sleep %+v", tk)
	}
	h.now += 2000
	h.ok(&Tick{})
	h.wantRun("r", domain.RunCancelled)
	if _, err := h.retry("r", ""); err != nil {
		t.Fatal(err)
	}
	if tk := h.task("r", "nap"); tk.State != domain.TaskReady || tk.DueAt != h.now+1000 {
		t.Fatalf("retried sleep %+v", tk)
	}
	h.now += 1000
	h.ok(&Tick{})
	h.wantRun("r", domain.RunSucceeded)
}

// Interrupting a parent interrupts its running child; resuming resumes it.
func TestChildRunInterruptAndResume(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"child","tasks":[{"key":"a","type":"c"},{"key":"b","type":"c","deps":["a"]}]}`)
	h.submit("p", `{"tasks":[{"key":"sub","type":"run","definition":"child"}]}`)
	child := h.childOf("p", "sub")
	h.verb(MsgInterrupt, "p")
	h.wantRun(child.ID, domain.RunInterrupted)
	h.wantNoClaim("w", "c")
	h.verb(MsgResume, "p")
	h.wantRun(child.ID, domain.RunRunning)
	h.forward("w", "a", "b")
	h.wantRun("p", domain.RunSucceeded)
}

// Decisions go on while a run is interrupted; nothing is dispatched until
// it resumes.
func TestDecisionsWhileInterrupted(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("r", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"],"when":"false"},
	 {"key":"c","type":"t","deps":["a"],"trigger":"all_done"}]}`, "", nil)
	c := h.claimOne("w")
	h.verb(MsgInterrupt, "r")
	h.complete(c, `1`)
	h.wantTasks("r", map[string]domain.TaskState{"b": domain.TaskSkipped, "c": domain.TaskReady})
	h.wantNoClaim("w")
	h.verb(MsgResume, "r")
	h.forward("w", "c")
	h.wantRun("r", domain.RunSucceeded)
}
