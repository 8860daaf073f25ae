package fsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// The model's child runs (V2, apply_child.go). Before any command the test
// stores up to two definitions, c0 and c1, drawn like any spec; their run
// tasks name an earlier definition, the definition itself (recursion, which
// the depth bound stops) or one that does not exist (missing, c0@2); a
// drawn run task names one of them or carries an inline spec (frozen in
// its run's spec, read back when it starts). A run task is never
// dispatched: in the entry in which it becomes ready it counts an attempt
// and starts a child run, which joins the model linked to it; the task ends when
// the child does — succeeded with the results of the child's final tasks
// (no task depends on them) by key, or failed, retried by its policy with a
// new child. Past the depth bound or without the definition it fails at
// once. Cancel (also when the parent fails, reverts or its body fails
// before its finally tasks), interrupt and resume of the parent apply to
// the latest child of each of its run tasks, and so down the tree; a child
// started while its parent is interrupted starts interrupted.

type mChildTask struct {
	def    string       // a run task's definition reference (inlineChild: inline)
	inline *domain.Spec // its inline spec
	child  *mRun        // the latest child run it started
}

type mChildRun struct {
	parent *mTask // the run task whose child this run is
	depth  int    // 0: not a child run
}

type mChildren struct {
	childDefs map[string]domain.Spec // the stored child definitions, by name (version 1)
	childRefs []string               // what a drawn run task may name
}

// TestModelChildRuns runs the model with child definitions always stored
// and the commands that start, finish and steer runs weighted up, so that
// parents meet their children in every state (TestModelRandomCommands has
// child runs too, among everything else).
func TestModelChildRuns(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rapidTB{TB: t, rt: rt})
		h.ok(&SettingsSet{BreakerFailures: ptr(-1)})
		h.ok(&SetVersion{Version: MaxVersion})
		m := &model{h: h}
		m.putChildDefs(rt, 1)
		rt.Repeat(map[string]func(*rapid.T){
			"submit":     m.submit,
			"submit_2":   m.submit,
			"claim":      m.claim,
			"claim_2":    m.claim,
			"complete":   m.complete,
			"complete_2": m.complete,
			"complete_3": m.complete,
			"fail":       m.fail,
			"reap":       m.reap,
			"tick":       m.tick,
			"tick_2":     m.tick,
			"signal":     m.signal,
			"verb":       m.verb,
			"verb_2":     m.verb,
			"retry":      m.retryRun,
			"":           m.check,
		})
		checkReplay(h.t, h, 2, rapid.Uint64().Draw(rt, "replay_seed"))
	})
}

// putChildDefs stores at least least child definitions, at most two
// (before any command).
func (m *model) putChildDefs(rt *rapid.T, least int) {
	m.childDefs = map[string]domain.Spec{}
	refs := []string{"missing", "c0@2"}
	for i := range rapid.IntRange(least, 2).Draw(rt, "child_defs") {
		name := fmt.Sprintf("c%d", i)
		own := refs
		if rapid.Bool().Draw(rt, "recursive") {
			own = append(slices.Clone(refs), name)
		}
		spec := drawSpecWith(rt, 3, own)
		spec.Name = name
		m.h.ok(&DefinitionPut{Name: name, Spec: spec})
		m.childDefs[name] = spec
		refs = append(refs, name, name+"@1")
	}
	m.childRefs = refs
}

// drawChild makes a drawn task a run task, sometimes: naming one of refs,
// or with an inline spec (drawn without run tasks).
func drawChild(rt *rapid.T, ts *domain.TaskSpec, refs []string) {
	if len(refs) == 0 || rapid.IntRange(0, 1).Draw(rt, "run_task?") != 0 {
		return
	}
	ts.Type, ts.TimeoutMS = domain.TypeRun, 0
	if rapid.IntRange(0, 3).Draw(rt, "inline?") == 0 {
		inline := drawSpecWith(rt, 2, nil)
		ts.Spec = &inline
		return
	}
	ts.Definition = rapid.SampledFrom(refs).Draw(rt, "definition_ref")
}

// armReady: a task that just became ready starts waiting (a wait task) or
// starts its child run (a run task).
func (m *model) armReady(t *mTask) {
	m.startWait(t)
	m.startChild(t)
}

// startChild starts the child run of the run task t, which just became
// ready; the FSM names the child (its id is the entry's to pick).
func (m *model) startChild(t *mTask) {
	if t.def == "" || t.state != domain.TaskReady {
		return
	}
	r := t.run
	t.attempt++
	name, version, err := domain.ParseDefinitionRef(t.def, domain.DefaultLimits)
	spec, found := m.childDefs[name]
	if t.def == inlineChild {
		name, err, found, spec = "", nil, true, *t.inline
	}
	if r.depth+1 > domain.MaxChildDepth || err != nil || !found || version > 1 {
		m.childEnded(t, nil)
		return
	}
	kids, err := m.h.f.ChildRuns(r.id)
	id := kids[t.key]
	if err != nil || id == "" || m.run(id) != nil {
		m.h.t.Fatalf("task %s became ready and started no new child run: children %v (%v)", t.id(), kids, err)
	}
	c := m.addRunOf(id, spec, t)
	if name != "" {
		c.def, c.defV = name, 1
	}
	if r.state == domain.RunInterrupted && (c.state == domain.RunRunning || c.state == domain.RunReverting) {
		m.interrupt(c) // it waits for the parent's resume
	}
}

// childDone ends the parent task of the child run c, which reached a done
// state, if that task still waits for it.
func (m *model) childDone(c *mRun) {
	t := c.parent
	if t == nil || t.state != domain.TaskReady || t.child != c {
		return
	}
	if c.state != domain.RunSucceeded {
		m.childEnded(t, nil)
		return
	}
	out := map[string]json.RawMessage{}
	for _, ct := range c.tasks {
		if len(ct.dependents) == 0 && ct.state == domain.TaskSucceeded {
			out[ct.key] = ct.result
			if ct.result == nil {
				out[ct.key] = json.RawMessage("null")
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		m.h.t.Fatal(err)
	}
	m.childEnded(t, b)
}

// childEnded ends the run task t: succeeded with result, or (nil) failed
// like an attempt (retried by its policy).
func (m *model) childEnded(t *mTask, result json.RawMessage) {
	if result == nil {
		m.failAttempt(t, true)
		return
	}
	t.state, t.result = domain.TaskSucceeded, result
	if m.executing(t.run) {
		m.promote(t.run)
	}
	m.derive(t.run)
}

// propagate applies a verb of r to the latest child runs of its tasks, in
// id order.
func (m *model) propagate(r *mRun, msg MsgType) {
	var kids []*mRun
	for _, t := range r.tasks {
		if t.child != nil {
			kids = append(kids, t.child)
		}
	}
	slices.SortFunc(kids, func(a, b *mRun) int { return strings.Compare(a.id, b.id) })
	for _, c := range kids {
		switch s := c.state; {
		case msg == MsgCancelRun && (s == domain.RunRunning || s == domain.RunReverting || s == domain.RunInterrupted):
			m.cancelRun(c)
		case msg == MsgInterrupt && (s == domain.RunRunning || s == domain.RunReverting):
			m.interrupt(c)
		case msg == MsgResume && s == domain.RunInterrupted:
			m.resume(c)
		}
	}
}

// runEnded: r reached a done state by its tasks; a failed run cancels its
// running children, and a child run ends its parent task.
func (m *model) runEnded(r *mRun) {
	if r.state == domain.RunFailed || r.state == domain.RunCancelled {
		m.propagate(r, MsgCancelRun)
	}
	m.childDone(r)
}

func (m *model) interrupt(r *mRun) {
	r.state, r.from = domain.RunInterrupted, r.state
	m.propagate(r, MsgInterrupt)
}

func (m *model) resume(r *mRun) {
	r.state, r.from = r.from, ""
	if r.state == domain.RunReverting {
		m.advanceRevert(r)
	} else {
		m.promote(r)
	}
	m.propagate(r, MsgResume)
	m.derive(r)
}

// checkChildren: both links of every child run are what the model says.
func (m *model) checkChildren(rt *rapid.T) {
	for _, r := range m.runs {
		kids, err := m.h.f.ChildRuns(r.id)
		if err != nil {
			rt.Fatal(err)
		}
		want := map[string]string{}
		for _, t := range r.tasks {
			if t.child != nil {
				want[t.key] = t.child.id
			}
		}
		if !maps.Equal(kids, want) {
			rt.Fatalf("run %s lists child runs %v, model %v", r.id, kids, want)
		}
		if r.parent == nil {
			continue
		}
		run, _, err := m.h.f.GetRun(r.id)
		if err != nil {
			rt.Fatal(err)
		}
		p := r.parent
		if run.ParentID != p.run.id || run.Labels[LabelParentRun] != p.run.id || run.Labels[LabelParentTask] != p.key ||
			p.def == inlineChild && run.Definition != "" {
			rt.Fatalf("child run %s: parent %q, labels %v; model %s", r.id, run.ParentID, run.Labels, p.id())
		}
	}
}
