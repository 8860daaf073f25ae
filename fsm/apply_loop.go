package fsm

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/expr"
)

// Loops over data (V2; domain/loop.go). A for_each task's expression and
// cap are in its run's rules record, with the loop's element keys and how
// many it released once it expanded. The task itself waits ready, never in
// the ready index (not dispatchable), while its element tasks run; they
// depend on its dependencies (their results) and have its dependents (a
// revert undoes them before what they depend on). Each element task that
// settles moves its loop on (loopStep): the next element is released, or
// the loop task ends.

// loopState is one loop in the rules record.
type loopState struct {
	ForEach     string   `json:"for_each"`
	MaxParallel int      `json:"max_parallel,omitempty"`
	Elements    []string `json:"elements,omitempty"` // keys, in list order, once expanded
	Released    int      `json:"released,omitempty"` // elements made ready so far
	Expanded    bool     `json:"expanded,omitempty"`
}

// loopOf returns the loop whose task is t (nil: t does not loop).
func (a *applier) loopOf(r *Run, t *Task) *loopState {
	if rr := a.rulesFor(r.ID); rr != nil {
		return rr.Loops[t.Key]
	}
	return nil
}

// elementOf returns the loop and loop task key of an element task t.
func (a *applier) elementOf(r *Run, t *Task) (*loopState, string, int) {
	if t.SpawnedBy == "" {
		return nil, "", 0
	}
	rr := a.rulesFor(r.ID)
	if rr == nil || rr.Loops[t.SpawnedBy] == nil {
		return nil, "", 0
	}
	l := rr.Loops[t.SpawnedBy]
	return l, t.SpawnedBy, slices.Index(l.Elements, t.Key)
}

// expandLoop makes the loop task t ready (not dispatchable) and creates
// its element tasks, releasing the first max_parallel.
func (a *applier) expandLoop(r *Run, t *Task, l *loopState) {
	a.stepTask(r, t, domain.EdgeDependenciesSatisfied, nil)
	t.ReadySeq, t.ReadyAt = a.nextSeq(), a.now
	if t.StartedAt == 0 {
		t.StartedAt = a.now
	}
	deps := map[string]expr.Dep{}
	for _, d := range t.Deps {
		if dt := a.loadTask(r.ID, d); dt != nil {
			deps[d] = expr.Dep{State: dt.State, Result: dt.Result}
		}
	}
	room := a.limits.MaxRunTasks - r.Tasks()
	elems, err := expr.EvalList(l.ForEach, expr.Env{Input: r.Input, Labels: r.Labels, Deps: deps}, room)
	if err != nil {
		a.endLoop(r, t, l, nil, "for_each: "+err.Error())
		return
	}
	l.Expanded = true
	var own any
	if len(t.Input) > 0 {
		own = json.RawMessage(t.Input)
	}
	have := r.Tasks()
	for i, e := range elems {
		in, err := json.Marshal(domain.LoopInput{Item: json.RawMessage(e), Index: i, Input: own})
		must(err)
		key := domain.LoopKey(t.Key, i)
		el := &Task{
			RunID: r.ID, Key: key, Seq: have + i, Type: t.Type, Queue: t.Queue, Input: in,
			Deps: t.Deps, Dependents: t.Dependents, Priority: t.Priority, LeaseMS: t.LeaseMS, Retry: t.Retry,
			RevertType: t.RevertType, TimeoutMS: t.TimeoutMS, ScheduleToStartMS: t.ScheduleToStartMS,
			ScheduleToStartPolicy: t.ScheduleToStartPolicy, SpawnedBy: t.Key, State: domain.TaskPending, CreateIndex: a.index,
		}
		a.newTask(el)
		r.Counts[domain.TaskPending]++
		l.Elements = append(l.Elements, key)
		a.emit(Event{Kind: "task", RunID: r.ID, TaskKey: key, Transition: "spawned", To: string(el.State), Queue: el.Queue, Type: el.Type})
	}
	// The dependencies revert after the elements, as after the loop task.
	for _, d := range t.Deps {
		if dt := a.loadTask(r.ID, d); dt != nil {
			dt.Dependents = append(dt.Dependents, l.Elements...)
		}
	}
	t.RevertType = "" // the elements carry the compensation
	a.putLoops(r)
	a.loopStep(r, t, l)
}

// loopStep releases elements up to the cap and ends the loop when every
// element settled, or one failed for good.
func (a *applier) loopStep(r *Run, t *Task, l *loopState) {
	if t.State != domain.TaskReady {
		return
	}
	active, done := 0, 0
	var failed *Task
	results := make([]json.RawMessage, len(l.Elements))
	for i, k := range l.Elements[:l.Released] {
		el := a.loadTask(r.ID, k)
		switch {
		case el == nil:
		case el.State == domain.TaskSucceeded:
			done++
			results[i] = el.Result
			if results[i] == nil {
				results[i] = json.RawMessage("null")
			}
		case el.State.Done():
			if failed == nil {
				failed = el
			}
		default:
			active++
		}
	}
	if failed != nil {
		a.endLoop(r, t, l, nil, fmt.Sprintf("%s %s: %s", failed.Key, failed.State, failed.Error))
		return
	}
	for l.Released < len(l.Elements) && (l.MaxParallel == 0 || active < l.MaxParallel) && a.executing(r) {
		el := a.loadTask(r.ID, l.Elements[l.Released])
		l.Released++
		active++
		if el != nil && el.State == domain.TaskPending {
			a.promote(r, el)
		}
	}
	a.putLoops(r)
	if done == len(l.Elements) {
		a.endLoop(r, t, l, results, "")
	}
}

// endLoop ends the loop task: with its elements' results in order, or
// failed with why (the elements not released are skipped).
func (a *applier) endLoop(r *Run, t *Task, l *loopState, results []json.RawMessage, why string) {
	t.FinishedAt = a.now
	if why != "" {
		// The elements not released will not run: skipped (a cancel would
		// make the run cancelled). Released ones finish or are stopped
		// with the run, as any task.
		for _, k := range l.Elements[l.Released:] {
			if el := a.loadTask(r.ID, k); el != nil && el.State == domain.TaskPending {
				a.skip(r, el, "skipped: loop "+t.Key+" failed")
			}
		}
		t.Error = why
		a.stepTask(r, t, domain.EdgeGatherFailed, func(e *Event) { e.Error = why })
		a.settled(r, t)
		a.derive(r)
		return
	}
	if results == nil {
		results = []json.RawMessage{}
	}
	b, err := json.Marshal(results)
	must(err)
	t.Result, t.Error = b, ""
	a.stepTask(r, t, domain.EdgeGather, nil)
	a.getCounters().TasksDone++
	if a.executing(r) {
		for _, d := range t.Dependents {
			a.advance(r, a.loadTask(r.ID, d))
		}
	}
	a.derive(r)
}

// elementSettled moves the loop of an element task on.
func (a *applier) elementSettled(r *Run, t *Task) {
	l, key, _ := a.elementOf(r, t)
	if l == nil {
		return
	}
	if lt := a.loadTask(r.ID, key); lt != nil {
		a.loopStep(r, lt, l)
	}
}

func (a *applier) putLoops(r *Run) {
	a.put(rulesKey(r.ID), a.rulesFor(r.ID))
}
