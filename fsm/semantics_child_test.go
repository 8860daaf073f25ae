package fsm

import (
	"encoding/json"
	"errors"
	"slices"
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

// A run task's string input is a CEL expression over the parent's input,
// labels and dependencies: its value is the child's input. One that does
// not compile is refused at submit with its path; one that fails when the
// task becomes ready fails the task (no child run).
func TestChildRunInputExpression(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"child","tasks":[{"key":"a","type":"c"}]}`)
	h.submitWith("p", `{"tasks":[{"key":"prep","type":"t"},
	 {"key":"sub","type":"run","definition":"child","deps":["prep"],
	  "input":"{'rows': input.rows.map(r, r * 10), 'env': labels.env, 'prep': deps.prep.result}"}]}`,
		`{"rows":[1,2]}`, map[string]string{"env": "test"})
	c := h.claim("w", 1, "t")[0]
	h.complete(c, `{"n":3}`)
	child := h.childOf("p", "sub")
	if want := `{"env":"test","prep":{"n":3},"rows":[10,20]}`; string(child.Input) != want {
		t.Fatalf("child input %s, want %s", child.Input, want)
	}

	s := domain.Spec{Tasks: []domain.TaskSpec{{Key: "sub", Type: domain.TypeRun, Definition: "child", Input: json.RawMessage(`"nope.rows"`)}}}
	var se *domain.SpecError
	if err, _ := h.apply(&Submit{ID: "bad", Spec: s}).(error); !errors.As(err, &se) || se.Problems[0].Path != "tasks[0].input" ||
		!strings.Contains(se.Problems[0].Message, "undeclared reference") {
		t.Fatalf("bad input expression: %v", err)
	}

	h.submit("q", `{"tasks":[{"key":"sub","type":"run","definition":"child","input":"input.missing"}]}`)
	h.wantRun("q", domain.RunFailed)
	if tk := h.task("q", "sub"); !strings.HasPrefix(tk.Error, "input: ") {
		t.Fatalf("run task error %q", tk.Error)
	}
	if kids, _ := h.f.ChildRuns("q"); len(kids) != 0 {
		t.Fatalf("a failed input expression started %v", kids)
	}

	// A literal input (an object, here) is the child's as it is.
	h.submit("lit", `{"tasks":[{"key":"sub","type":"run","definition":"child","input":{"x":"input.rows"}}]}`)
	if c := h.childOf("lit", "sub"); string(c.Input) != `{"x":"input.rows"}` {
		t.Fatalf("literal input %s", c.Input)
	}
}

// A run task with an inline spec instead of a definition runs it: checked
// with the parent's spec at submit (its problems under the task's path),
// frozen in the parent's spec; the child records no definition.
func TestChildRunInlineSpec(t *testing.T) {
	h := newSemV2(t)
	h.submitWith("p", `{"tasks":[
	 {"key":"sub","type":"run","input":"{'n': input.n + 1}","spec":{"tasks":[
	   {"key":"a","type":"c"},{"key":"b","type":"c","deps":["a"],"when":"input.n == 2"}]}},
	 {"key":"after","type":"t","deps":["sub"]}]}`, `{"n":1}`, nil)
	child := h.childOf("p", "sub")
	if child.ParentID != "p" || child.Definition != "" || string(child.Input) != `{"n":2}` || child.State != domain.RunRunning {
		t.Fatalf("child run %+v", child)
	}
	for _, k := range []string{"a", "b"} {
		c := h.claim("w", 1, "c")[0]
		if c.RunID != child.ID || c.TaskKey != k {
			t.Fatalf("claimed %s/%s", c.RunID, c.TaskKey)
		}
		h.complete(c, `"`+k+`-out"`)
	}
	c := h.claimOne("w")
	if c.TaskKey != "after" || string(c.DepResults["sub"]) != `{"b":"b-out"}` {
		t.Fatalf("dependent %s got %s", c.TaskKey, c.DepResults["sub"])
	}
	h.complete(c, `1`)
	h.wantRun("p", domain.RunSucceeded)

	// The frozen spec keeps the inline one (the codec round trip).
	frozen, err := h.f.GetSpec("p")
	if err != nil || frozen == nil || frozen.Tasks[0].Spec == nil || len(frozen.Tasks[0].Spec.Tasks) != 2 || frozen.Tasks[0].Spec.Tasks[1].When != "input.n == 2" {
		t.Fatalf("frozen spec %+v (%v)", frozen, err)
	}

	// Problems of the inline spec are reported at their paths, by the
	// parser, the validator and the expression checker alike.
	for _, tc := range []struct{ spec, path, msg string }{
		{`{"tasks":[{"key":"s","type":"run","spec":{"tasks":[]}}]}`, "tasks[0].spec.tasks", "at least one task"},
		{`{"tasks":[{"key":"s","type":"run","spec":{"tasks":[{"key":"a","type":"c","bogus":1}]}}]}`, "tasks[0].spec.tasks[0].bogus", "unknown field"},
		{`{"tasks":[{"key":"s","type":"run","definition":"d","spec":{"tasks":[{"key":"a","type":"c"}]}}]}`, "tasks[0].spec", "not both"},
		{`{"tasks":[{"key":"s","type":"t","spec":{"tasks":[{"key":"a","type":"c"}]}}]}`, "tasks[0].spec", "only a task of type"},
	} {
		_, err := domain.ParseSpec([]byte(tc.spec), domain.DefaultLimits)
		var se *domain.SpecError
		if !errors.As(err, &se) || !slices.ContainsFunc(se.Problems, func(p domain.Problem) bool {
			return p.Path == tc.path && strings.Contains(p.Message, tc.msg)
		}) {
			t.Errorf("%s: %v, want %q at %s", tc.spec, err, tc.msg, tc.path)
		}
	}
	inner := domain.Spec{Tasks: []domain.TaskSpec{{Key: "a", Type: "c", When: "nope > 1"}}}
	s := domain.Spec{Tasks: []domain.TaskSpec{{Key: "s", Type: domain.TypeRun, Spec: &inner}}}
	var se *domain.SpecError
	if err, _ := h.apply(&Submit{ID: "bad", Spec: s}).(error); !errors.As(err, &se) || se.Problems[0].Path != "tasks[0].spec.tasks[0].when" {
		t.Fatalf("bad inline condition: %v", err)
	}
}

// A child run started while its parent is interrupted (its task became
// ready when a running dependency finished) starts interrupted: nothing of
// it is dispatched until the parent's resume resumes it.
func TestChildRunStartedUnderInterruptedParentWaits(t *testing.T) {
	h := newSemV2(t)
	h.putSpecDef(`{"name":"child","tasks":[{"key":"a","type":"c"}]}`)
	h.submit("p", `{"tasks":[{"key":"prep","type":"t"},{"key":"sub","type":"run","definition":"child","deps":["prep"]}]}`)
	c := h.claim("w", 1, "t")[0]
	h.verb(MsgInterrupt, "p")
	h.complete(c, `1`)
	child := h.childOf("p", "sub")
	h.wantRun(child.ID, domain.RunInterrupted)
	h.wantNoClaim("w", "c")
	h.verb(MsgResume, "p")
	h.wantRun(child.ID, domain.RunRunning)
	h.complete(h.claim("w", 1, "c")[0], `2`)
	h.wantRun("p", domain.RunSucceeded)
}
