package fsm

import (
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of child runs (V2, apply_child.go).

func (h *harness) putSpecDef(spec string) {
	h.t.Helper()
	s, err := domain.ParseSpec([]byte(spec), domain.DefaultLimits)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ok(&DefinitionPut{Name: s.Name, Spec: s})
}

func (h *harness) childOf(run, key string) *Run {
	h.t.Helper()
	kids, err := h.f.ChildRuns(run)
	if err != nil || kids[key] == "" {
		h.t.Fatalf("no child run for %s/%s: %v %v", run, key, kids, err)
	}
	r, _ := h.run(kids[key])
	return r
}

// A task of type run starts a run of the definition in the entry in which
// it becomes ready, linked both ways; it succeeds with the outputs of the
// child's final tasks, which its dependent receives.
func TestChildRunCompletesAndItsResultFlows(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"child","tasks":[{"key":"a","type":"c"},{"key":"b","type":"c","deps":["a"]}]}`)
	h.submit("p", `{"tasks":[{"key":"prep","type":"t"},{"key":"sub","type":"run","definition":"child","input":{"x":1},"deps":["prep"]},
	 {"key":"after","type":"t","deps":["sub"]}]}`)
	h.forward("w", "prep")
	child := h.childOf("p", "sub")
	if child.ParentID != "p" || child.Labels[LabelParentRun] != "p" || child.Labels[LabelParentTask] != "sub" ||
		child.Definition != "child" || string(child.Input) != `{"x":1}` || child.State != domain.RunRunning || !ValidRunID(child.ID) {
		t.Fatalf("child run %+v", child)
	}
	h.wantNoClaim("w", "run") // the run task itself is never dispatched
	for _, k := range []string{"a", "b"} {
		c := h.claim("w", 1, "c")[0]
		if c.RunID != child.ID || c.TaskKey != k {
			t.Fatalf("claimed %s/%s", c.RunID, c.TaskKey)
		}
		h.complete(c, `"`+k+`-out"`)
	}
	h.wantRun(child.ID, domain.RunSucceeded)
	c := h.claimOne("w")
	if c.TaskKey != "after" || string(c.DepResults["sub"]) != `{"b":"b-out"}` {
		t.Fatalf("dependent %s got %s", c.TaskKey, c.DepResults["sub"])
	}
	h.complete(c, `1`)
	h.wantRun("p", domain.RunSucceeded)
}

// A child that fails fails its task and the parent; cancelling a parent
// cancels its running child.
func TestChildRunFailureAndCancel(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"child","tasks":[{"key":"a","type":"c"}]}`)
	h.submit("p", `{"tasks":[{"key":"sub","type":"run","definition":"child"}]}`)
	h.fail(h.claim("w", 1, "c")[0], "broken", false)
	h.wantRun("p", domain.RunFailed)
	if tk := h.task("p", "sub"); !strings.Contains(tk.Error, "failed") {
		t.Fatalf("run task error %q", tk.Error)
	}
	h.submit("q", `{"tasks":[{"key":"sub","type":"run","definition":"child"}]}`)
	child := h.childOf("q", "sub")
	h.verb(MsgCancelRun, "q")
	h.wantRun(child.ID, domain.RunCancelled)
	h.wantTasks("q", map[string]domain.TaskState{"sub": domain.TaskCancelled})
}

// A definition that starts itself stops at the depth limit: the deepest
// task fails and every ancestor with it, in one entry.
func TestChildRunDepthLimit(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"rec","tasks":[{"key":"again","type":"run","definition":"rec"}]}`)
	h.submit("p", `{"tasks":[{"key":"go","type":"run","definition":"rec"}]}`)
	h.wantRun("p", domain.RunFailed)
	id, depth := "p", 0
	for {
		kids, _ := h.f.ChildRuns(id)
		next := kids["go"] + kids["again"]
		if next == "" {
			break
		}
		id, depth = next, depth+1
	}
	if depth != domain.MaxChildDepth {
		t.Fatalf("nested %d deep, want %d", depth, domain.MaxChildDepth)
	}
	if tk := h.task(id, "again"); !strings.Contains(tk.Error, "nest at most") {
		t.Fatalf("deepest task %+v", tk)
	}
}

// A parent that fails (another task failed) cancels its running child: no
// task waits for it any more.
func TestChildRunCancelledWhenParentFails(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"child","tasks":[{"key":"a","type":"c"}]}`)
	h.submit("p", `{"tasks":[{"key":"sub","type":"run","definition":"child"},{"key":"other","type":"t"}]}`)
	child := h.childOf("p", "sub")
	h.fail(h.claim("w", 1, "t")[0], "boom", false)
	h.wantRun("p", domain.RunFailed)
	h.wantRun(child.ID, domain.RunCancelled)
}
