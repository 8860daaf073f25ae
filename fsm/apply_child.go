package fsm

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/expr"
)

// Child runs (V2; domain/child.go). A task of type run with a definition
// is never dispatched: when it becomes ready (armReady) it starts a run of
// the definition in the same entry, and waits, ready, until that run
// ends: the child's rules record names its parent task, and the child's
// step into a done state (stepRun) ends the task. The parent's rules
// record lists the child runs its tasks started. The child's id is
// UUIDv7-shaped from the entry's time and a number unique to the entry,
// so runs still list in time order and every replica picks the same id.

// Labels of a child run.
const (
	LabelParentRun  = "flowd.parent_run"
	LabelParentTask = "flowd.parent_task"
)

// parentRef names a child run's parent task.
type parentRef struct {
	Run   string `json:"run"`
	Task  string `json:"task"`
	Depth int    `json:"depth"`
}

// isRunTask reports whether t starts a child run.
func (a *applier) isRunTask(t *Task) bool {
	if t.Type != domain.TypeRun {
		return false
	}
	rr := a.rulesFor(t.RunID)
	return rr != nil && rr.RunTasks[t.Key] != ""
}

// childID is a new child run's id.
func (a *applier) childID() string {
	ms, seq := uint64(a.now), a.nextSeq()
	return fmt.Sprintf("%08x-%04x-7%03x-%04x-%012x", ms>>16, ms&0xffff, (seq>>48)&0xfff, 0x8000|((seq>>32)&0x3fff), seq&0xffffffffffff)
}

// startChild starts the child run of the run task t, which just became
// ready.
func (a *applier) startChild(t *Task) {
	r := a.loadRun(t.RunID)
	rr := a.rulesFor(r.ID)
	t.Attempt++
	if t.StartedAt == 0 {
		t.StartedAt = a.now
	}
	depth := 1
	if rr.Parent != nil {
		depth = rr.Parent.Depth + 1
	}
	if depth > domain.MaxChildDepth {
		a.childEnded(r, t, nil, fmt.Sprintf("child runs nest at most %d deep", domain.MaxChildDepth))
		return
	}
	spec, def, why := a.childSpec(r, rr.RunTasks[t.Key], t.Key)
	if why != "" {
		a.childEnded(r, t, nil, why)
		return
	}
	input := t.Input
	if src := domain.InputExpr(t.Input); src != "" {
		deps := make(map[string]expr.Dep, len(t.Deps))
		for _, k := range t.Deps {
			if dt := a.loadTask(r.ID, k); dt != nil {
				deps[k] = expr.Dep{State: dt.State, Result: dt.Result}
			}
		}
		var err error
		if input, err = expr.EvalJSON(src, expr.Env{Input: r.Input, Labels: r.Labels, Deps: deps}); err != nil {
			a.childEnded(r, t, nil, "input: "+err.Error())
			return
		}
	}
	id := a.childID()
	a.setRules(id, &runRules{Parent: &parentRef{Run: r.ID, Task: t.Key, Depth: depth}})
	labels := map[string]string{LabelParentRun: r.ID, LabelParentTask: t.Key}
	res := a.applySubmit(&Submit{ID: id, Spec: spec, Input: input, Labels: labels})
	if err, ok := res.(error); ok {
		delete(a.rules, id)
		a.childEnded(r, t, nil, "child run not started: "+err.Error())
		return
	}
	// Linked once it exists (a child that ends in its creating entry is
	// ended below, not by stepRun: its parent_id is not set yet).
	if rr.Children == nil {
		rr.Children = map[string]string{}
	}
	rr.Children[t.Key] = id
	a.put(rulesKey(r.ID), rr)
	if child := a.loadRun(id); child != nil {
		child.ParentID = r.ID
		if def != nil {
			child.Definition, child.DefinitionVersion = def.Name, def.Version
		}
		a.emit(Event{Kind: "task", RunID: r.ID, TaskKey: t.Key, Transition: "child_started", // not an edge: no From
			To: string(t.State), Name: id, Attempt: t.Attempt, Queue: t.Queue, Type: t.Type})
		if r.State == domain.RunInterrupted {
			// Nothing new runs under an interrupted run: the child waits
			// for the parent's resume, which resumes it.
			a.interruptRun(child)
		}
		if child.State.Done() { // it ended in its creating entry
			a.childRunDone(child)
		}
	}
}

// inlineChild is, in the rules record's RunTasks, a run task whose child
// runs the inline spec frozen in the run's spec rather than a definition.
const inlineChild = "(spec)"

// childSpec is the spec a child of run task key of r runs: its inline
// spec, or the stored definition ref names (def); why says why there is
// none.
func (a *applier) childSpec(r *Run, ref, key string) (spec domain.Spec, def *Definition, why string) {
	if ref == inlineChild {
		ps, err := loadSpec(a.tx, r.ID)
		must(err)
		if ps != nil {
			for _, ts := range append(slices.Clone(ps.Tasks), ps.Finally...) {
				if ts.Key == key && ts.Spec != nil {
					return *ts.Spec, nil, ""
				}
			}
		}
		return spec, nil, "the run's spec holds no inline spec for task " + key
	}
	name, version, err := domain.ParseDefinitionRef(ref, a.limits)
	if err != nil {
		return spec, nil, err.Error()
	}
	d, err := getDefinition(a.tx, name, version)
	must(err)
	if d == nil {
		return spec, nil, definitionNotFound(name, version).Error()
	}
	return d.Spec, d, ""
}

// childRunDone ends the parent task of a child run that reached a done
// state (stepRun).
func (a *applier) childRunDone(child *Run) {
	rr := a.rulesFor(child.ID)
	if rr == nil || rr.Parent == nil {
		return
	}
	p := a.loadRun(rr.Parent.Run)
	if p == nil {
		return
	}
	t := a.loadTask(p.ID, rr.Parent.Task)
	prr := a.rulesFor(p.ID)
	if t == nil || t.State != domain.TaskReady || prr == nil || prr.Children[t.Key] != child.ID {
		return // the parent task moved on (cancelled, reverted): nothing waits
	}
	if child.State == domain.RunSucceeded {
		a.childEnded(p, t, a.childOutputs(child), "")
		return
	}
	why := fmt.Sprintf("child run %s %s", child.ID, child.State)
	if child.Reason != "" {
		why += ": " + child.Reason
	}
	a.childEnded(p, t, nil, why)
}

// childOutputs is a succeeded child run's result: the results of its
// final tasks (no task depends on them), by key.
func (a *applier) childOutputs(child *Run) json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, t := range a.runTasks(child.ID) {
		if len(t.Dependents) == 0 && t.State == domain.TaskSucceeded {
			res := t.Result
			if res == nil {
				res = json.RawMessage("null")
			}
			out[t.Key] = res
		}
	}
	b, err := json.Marshal(out) // keys sorted
	must(err)
	return b
}

// childEnded ends the run task t: succeeded with result, or failed with
// why (retried by its policy: a retry starts a new child run).
func (a *applier) childEnded(r *Run, t *Task, result json.RawMessage, why string) {
	if why == "" {
		t.Result, t.Error, t.FinishedAt = result, "", a.now
		a.stepTask(r, t, domain.EdgeChildSucceeded, nil)
		a.getCounters().TasksDone++
		if a.executing(r) {
			for _, d := range t.Dependents {
				a.advance(r, a.loadTask(r.ID, d))
			}
		}
		a.derive(r)
		return
	}
	t.Error = why
	a.stepTask(r, t, domain.EdgeChildFailed, func(e *Event) { e.Error = why })
	if a.canRetry(r, t) {
		a.stepTask(r, t, domain.EdgeScheduleRetry, nil)
		a.wake(t, a.now+domain.Backoff(t.Retry, t.ID(), t.Attempt))
		return
	}
	t.FinishedAt = a.now
	a.settled(r, t)
	a.derive(r)
}

// childRuns lists the active child runs r's tasks started, in id order.
func (a *applier) childRuns(r *Run) []*Run {
	rr := a.rulesFor(r.ID)
	if rr == nil || len(rr.Children) == 0 {
		return nil
	}
	ids := make([]string, 0, len(rr.Children))
	for _, id := range rr.Children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []*Run
	for _, id := range ids {
		if c := a.loadRun(id); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// propagate applies a verb of r to its running children: cancel (also
// when r is reverted: nothing waits for them), interrupt, resume.
func (a *applier) propagate(r *Run, msg MsgType, reason string) {
	for _, c := range a.childRuns(r) {
		switch msg {
		case MsgCancelRun:
			if !c.State.Done() {
				a.cancelRun(c, "parent run "+r.ID+": "+reason)
			}
		case MsgInterrupt:
			a.interruptRun(c)
		case MsgResume:
			a.resumeRun(c)
		}
	}
}

// ChildRuns returns the ids of the child runs run id's tasks started, by
// task key.
func (f *FSM) ChildRuns(id string) (map[string]string, error) {
	var out map[string]string
	err := f.View(func(r Reader) error {
		rr, err := getJSON[runRules](r, rulesKey(id))
		if rr != nil {
			out = rr.Children
		}
		return err
	})
	return out, err
}
