package fsm

import (
	"fmt"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/expr"
)

// Workflows that decide (V2; domain/decide.go): trigger rules and when
// conditions. A run whose spec uses them has a rules record, written once
// at creation:
//
//	rx/<run>   the tasks' trigger rules and conditions (JSON)
//
// Its presence is what makes a run decided by these rules; a run without
// it (every run created before V2, and every run whose spec uses neither)
// is promoted and derived exactly as in V1. The rules are a record apart
// rather than fields of the Run and Task tuples so that no record layout
// changes: a cluster of two releases writes equal bytes until it is
// finalized.

var pfxRules = []byte("rx/")

// keyRulesRuns counts the runs that hold a rules record (u64; absent: 0).
// While it is 0 — every cluster that has not used a version-2 feature, or
// no longer holds such a run — no entry looks a run's rules record up:
// the queue path of a V1 workload pays nothing for them.
var keyRulesRuns = []byte("m/rules_runs")

// anyRules reports whether some run holds a rules record (read once per
// entry).
func (a *applier) anyRules() bool {
	if !a.rulesRunsOK {
		v, ok, err := a.tx.Get(keyRulesRuns)
		must(err)
		a.rulesRuns = 0
		if ok {
			a.rulesRuns = getU64(v)
		}
		a.rulesRunsOK = true
	}
	return a.rulesRuns > 0
}

// countRulesRun adds d to the runs holding a rules record.
func (a *applier) countRulesRun(d int) {
	a.anyRules()
	a.rulesRuns = uint64(int64(a.rulesRuns) + int64(d))
	if a.rulesRuns == 0 {
		a.del(keyRulesRuns)
		return
	}
	must(a.tx.Set(keyRulesRuns, u64(a.rulesRuns)))
}

func rulesKey(id string) []byte { return cat(pfxRules, []byte(id)) }

// runRules is the rules record. A run retried in place (apply_retry.go)
// gets one too, holding only Base.
type runRules struct {
	// Tasks are the trigger rules and conditions, by task key; none: the
	// run is not decided by them (V1 promotion and derivation).
	Tasks map[string]taskRule `json:"tasks,omitempty"`
	// Base is, by task key, the attempts the task had made before its
	// last run.retry: its retry policy counts the attempts after it.
	Base map[string]int `json:"base,omitempty"`
	// Finally: the run's finally tasks (apply_finally.go).
	Finally *finallyState `json:"finally,omitempty"`
	// Sleeps are the run's sleep tasks' timers, by key (apply_sleep.go).
	Sleeps map[string]sleepRule `json:"sleeps,omitempty"`
	// Loops are the run's for_each tasks, by key (apply_loop.go).
	Loops map[string]*loopState `json:"loops,omitempty"`
	// RunTasks are the definitions of the run's child-run tasks, by key;
	// Children the child runs they started (the latest per task); Parent
	// the task whose child this run is (apply_child.go).
	RunTasks map[string]string `json:"run_tasks,omitempty"`
	Children map[string]string `json:"children,omitempty"`
	Parent   *parentRef        `json:"parent,omitempty"`
}

type taskRule struct {
	When    string `json:"when,omitempty"`
	Trigger string `json:"trigger,omitempty"`
}

// rulesOf builds the rules record of spec (nil: it uses none).
func rulesOf(spec domain.Spec) *runRules {
	if !spec.UsesV2() {
		return nil
	}
	rr := &runRules{}
	for _, t := range spec.Tasks {
		if t.When != "" || t.Trigger != "" {
			if rr.Tasks == nil {
				rr.Tasks = map[string]taskRule{}
			}
			rr.Tasks[t.Key] = taskRule{When: t.When, Trigger: t.Trigger}
		}
	}
	for _, ts := range [][]domain.TaskSpec{spec.Tasks, spec.Finally} {
		for _, t := range ts {
			if t.IsSleep() {
				if rr.Sleeps == nil {
					rr.Sleeps = map[string]sleepRule{}
				}
				until, _ := domain.SleepUntilMS(t.Until) // validated
				rr.Sleeps[t.Key] = sleepRule{DurationMS: t.DurationMS, UntilMS: until}
			}
		}
	}
	for _, ts := range [][]domain.TaskSpec{spec.Tasks, spec.Finally} {
		for _, t := range ts {
			if t.IsRunTask() {
				if rr.RunTasks == nil {
					rr.RunTasks = map[string]string{}
				}
				rr.RunTasks[t.Key] = t.Definition
				if t.Spec != nil {
					rr.RunTasks[t.Key] = inlineChild // frozen in the run's spec
				}
			}
		}
	}
	for _, t := range spec.Tasks {
		if t.ForEach != "" {
			if rr.Loops == nil {
				rr.Loops = map[string]*loopState{}
			}
			rr.Loops[t.Key] = &loopState{ForEach: t.ForEach, MaxParallel: t.MaxParallel}
		}
	}
	if len(spec.Finally) > 0 {
		rr.Finally = &finallyState{}
		for _, t := range spec.Finally {
			rr.Finally.Keys = append(rr.Finally.Keys, t.Key)
		}
	}
	return rr
}

// putRules stores the rules record of a run being created.
func (a *applier) putRules(id string, spec domain.Spec) {
	rr := rulesOf(spec)
	if a.rules == nil {
		a.rules = map[string]*runRules{}
	}
	if prev := a.rules[id]; prev != nil && prev.Parent != nil {
		// A child run: its link to its parent was set before it was
		// created (startChild), so a child that ends at once is seen.
		if rr == nil {
			rr = &runRules{}
		}
		rr.Parent = prev.Parent
	}
	a.rules[id] = rr
	if rr != nil {
		a.countRulesRun(1)
		a.put(rulesKey(id), rr)
	}
}

// setRules caches rr as run id's rules record for the entry.
func (a *applier) setRules(id string, rr *runRules) {
	if a.rules == nil {
		a.rules = map[string]*runRules{}
	}
	a.rules[id] = rr
}

// rulesFor returns run id's rules, nil for a run that uses none. Cached
// for the entry: the record never changes after creation.
func (a *applier) rulesFor(id string) *runRules {
	if rr, ok := a.rules[id]; ok {
		return rr
	}
	if !a.anyRules() {
		return nil
	}
	rr, err := getJSON[runRules](a.tx, rulesKey(id))
	must(err)
	if a.rules == nil {
		a.rules = map[string]*runRules{}
	}
	a.rules[id] = rr
	return rr
}

// decided reports whether r is decided by trigger rules and conditions.
func (a *applier) decided(r *Run) bool {
	rr := a.rulesFor(r.ID)
	return rr != nil && len(rr.Tasks) > 0
}

// SpecNeedsVersion returns the error for a spec that uses fields the
// active version does not have yet (nil: it may be proposed). The agent
// refuses such a spec before proposing it (the fields are V2's).
func SpecNeedsVersion(spec domain.Spec, active Version) error {
	if spec.UsesV2() && active < V2 {
		return fmt.Errorf("%w: %w: trigger rules, when conditions, finally tasks, sleep timers, for_each loops and child runs came with state-machine version %d and the cluster runs %d; finalize the upgrade (`flowd operator upgrade finalize`) once every agent runs the new release",
			ErrInvalidArgument, ErrNeedsVersion, V2, active)
	}
	return nil
}

// versioned is spec as the active version reads it. Below V2 the V2
// fields are dropped: a binary of the release before them decodes a
// spec's tuple (or JSON) without them, and every replica must apply the
// entry alike, so this one does too. The agent refuses such a spec
// before it is proposed (SpecNeedsVersion); this only keeps the replicas
// equal should one be proposed anyway.
func (a *applier) versioned(spec domain.Spec) domain.Spec {
	if spec.UsesV2() && !a.atLeast(V2) {
		return spec.StripV2()
	}
	return spec
}

// validSpec is a spec's validation inside Apply: the domain's rules and
// its expressions compiled (versioned first).
func (a *applier) validSpec(spec domain.Spec) error {
	return expr.Validate(spec, domain.ValidateSpec(spec, a.limits))
}

// advance decides a pending task whose dependencies may allow it to run:
// in a run without rules, it is promoted once every dependency succeeded
// (V1); in a run with rules, once every dependency settled its trigger
// rule and condition decide (decide). Skips cascade to the dependents.
func (a *applier) advance(r *Run, t *Task) {
	if t == nil || t.State != domain.TaskPending || a.held(r, t) {
		return
	}
	rr := a.rulesFor(r.ID)
	if rr == nil || len(rr.Tasks) == 0 && !a.isFinally(r, t) {
		if a.depsSucceeded(t) {
			a.promote(r, t)
		}
		return
	}
	work := []*Task{t}
	for len(work) > 0 {
		t := work[0]
		work = work[1:]
		if t == nil || t.State != domain.TaskPending || a.held(r, t) || !a.decide(r, rr, t) {
			continue
		}
		if t.State == domain.TaskSkipped || t.State == domain.TaskFailed {
			for _, d := range t.Dependents {
				if dt := a.loadTask(r.ID, d); dt != nil && (len(rr.Tasks) > 0 || a.isFinally(r, dt)) {
					work = append(work, dt)
				}
			}
		}
	}
}

// settled is called when t reached a settled state other than success
// (failed for good): in a run with rules its dependents are decided. A run
// without rules fails instead (derive), as in V1.
func (a *applier) settled(r *Run, t *Task) {
	if !a.executing(r) {
		return
	}
	a.elementSettled(r, t)
	if !a.decided(r) && !a.isFinally(r, t) {
		return // finally tasks are always decided: a failed one skips its dependents
	}
	for _, d := range t.Dependents {
		a.advance(r, a.loadTask(r.ID, d))
	}
}

// decide settles or promotes the pending task t once every dependency has
// settled, and reports whether it did.
func (a *applier) decide(r *Run, rr *runRules, t *Task) bool {
	var out domain.DepOutcomes
	deps := make(map[string]expr.Dep, len(t.Deps))
	for _, d := range t.Deps {
		dt := a.loadTask(r.ID, d)
		if dt == nil || !dt.State.Done() {
			return false
		}
		out.Add(dt.State)
		deps[d] = expr.Dep{State: dt.State, Result: dt.Result}
	}
	rule := rr.Tasks[t.Key]
	trig, _ := domain.TriggerOf(rule.Trigger) // validated at submit
	if !trig.Met(out) {
		a.skip(r, t, trig.SkipReason(out))
		return true
	}
	if rule.When != "" {
		ok, err := expr.Eval(rule.When, expr.Env{Input: r.Input, Labels: r.Labels, Deps: deps})
		switch {
		case err != nil:
			msg := "when: " + err.Error()
			t.Error, t.FinishedAt = msg, a.now
			a.stepTask(r, t, domain.EdgeConditionFailed, func(e *Event) { e.Error = msg })
			return true
		case !ok:
			a.skip(r, t, "skipped: when is false: "+rule.When)
			return true
		}
	}
	a.promote(r, t)
	return true
}

func (a *applier) skip(r *Run, t *Task, why string) {
	t.Error, t.FinishedAt = why, a.now
	a.stepTask(r, t, domain.EdgeSkip, func(e *Event) { e.Error = why })
}

// deriveState is the run state r's task counts give, by the rules r runs
// under.
func (a *applier) deriveState(r *Run) domain.RunState {
	if a.decided(r) {
		return domain.DeriveDecided(r.State, r.Counts)
	}
	return domain.Derive(r.State, r.Counts)
}
