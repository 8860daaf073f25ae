package fsm

import (
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// The commit hook gets each commit's events with the in-memory timing
// fields the leader's histograms use: a claim's ready time, an ended
// attempt's claim time and outcome, a finished run's start and workflow.
// None of them is stored: the events read back from the window lack them.
func TestCommitHookEventTimes(t *testing.T) {
	h := newHarness(t)
	var got []Event
	h.f.SetCommitHook(func(evs []Event) { got = append(got, evs...) })
	find := func(kind, transition string) Event {
		t.Helper()
		for _, e := range got {
			if e.Kind == kind && e.Transition == transition {
				return e
			}
		}
		t.Fatalf("no %s %s event among %+v", kind, transition, got)
		return Event{}
	}
	t0 := h.now
	h.submit("r", `{"name":"wf","tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)
	h.now += 500
	c := h.claimOne("w")
	if e := find("task", domain.EdgeClaim); e.Since != t0 || e.At != t0+500 || e.Outcome != "" {
		t.Fatalf("claim event: since %d at %d outcome %q; want since %d (ready at submit), at %d", e.Since, e.At, e.Outcome, t0, t0+500)
	}
	got = nil
	h.now += 1000
	h.complete(c, `1`)
	if e := find("task", domain.EdgeSucceed); e.Since != t0+500 || e.At != t0+1500 || e.Outcome != OutcomeSucceeded {
		t.Fatalf("succeed event: since %d at %d outcome %q; want since the claim %d, at %d, succeeded", e.Since, e.At, e.Outcome, t0+500, t0+1500)
	}
	if e := find("task", domain.EdgeDependenciesSatisfied); e.Since != 0 || e.Outcome != "" {
		t.Fatalf("the dependent's promotion carries the ended attempt: %+v", e)
	}
	got = nil
	h.now += 200
	c = h.claimOne("w")
	if e := find("task", domain.EdgeClaim); e.Since != t0+1500 {
		t.Fatalf("b's claim: since %d, want %d (ready when a succeeded)", e.Since, t0+1500)
	}
	h.now += 300
	h.fail(c, "boom", false)
	if e := find("task", domain.EdgeFail); e.Since != t0+1700 || e.Outcome != OutcomeFailed {
		t.Fatalf("fail event: since %d outcome %q; want %d, failed", e.Since, e.Outcome, t0+1700)
	}
	if e := find("run", domain.EdgeFail); e.Since != t0 || e.Workflow != "wf" || e.At != t0+2000 {
		t.Fatalf("run fail event: since %d workflow %q at %d; want since the start %d, wf, at %d", e.Since, e.Workflow, e.At, t0, t0+2000)
	}
	stored, _, err := h.f.Events(0, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 {
		t.Fatal("no stored events")
	}
	for _, e := range stored {
		if e.Since != 0 || e.Outcome != "" || e.Workflow != "" {
			t.Fatalf("a stored event kept an in-memory field: %+v", e)
		}
	}
	h.f.SetCommitHook(nil)
	got = nil
	h.submit("r2", `{"tasks":[{"key":"a","type":"t"}]}`)
	if len(got) != 0 {
		t.Fatalf("a removed hook was called with %+v", got)
	}
}
