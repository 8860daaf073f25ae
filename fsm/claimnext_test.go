package fsm

import (
	"encoding/json"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// A completion with a claim leases the worker's next task in the same
// entry: the completion is recorded first (so a dependent it made ready can
// be the next task), the next task's fencing token is that entry's index,
// and a stale completion still claims (the worker is alive and asks for
// work); nothing ready gives an empty, non-nil list.
func TestCompleteClaimsTheNextTaskInTheSameEntry(t *testing.T) {
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]},{"key":"c","type":"u"}]}`)
	a := h.claim("w", 1, "t")[0]
	next := &Waiter{WorkerID: "w", Types: []string{"t"}, Max: 1}
	ack := h.ok(&Complete{TaskID: a.TaskID, Token: a.FencingToken, Result: json.RawMessage(`1`), Claim: next}).(*AckResult)
	if !ack.Accepted || len(ack.Claimed) != 1 || ack.Claimed[0].TaskKey != "b" {
		t.Fatalf("complete a + claim: %+v", ack)
	}
	b := ack.Claimed[0]
	if b.FencingToken != h.index {
		t.Fatalf("b's token %d, want the entry's index %d", b.FencingToken, h.index)
	}
	if string(b.DepResults["a"]) != "1" {
		t.Fatalf("b's dep results %v", b.DepResults)
	}
	_, ts := h.run("r")
	if ts["a"].State != domain.TaskSucceeded || ts["b"].State != domain.TaskRunning || ts["b"].LeaseOwner != "w" {
		t.Fatalf("a %s, b %s owned by %q", ts["a"].State, ts["b"].State, ts["b"].LeaseOwner)
	}
	// Stale token: not accepted, but the claim still runs (here: c).
	stale := h.ok(&Complete{TaskID: a.TaskID, Token: a.FencingToken + 100, Claim: &Waiter{WorkerID: "w2", Max: 2}}).(*AckResult)
	if stale.Accepted || len(stale.Claimed) != 1 || stale.Claimed[0].TaskKey != "c" {
		t.Fatalf("stale completion + claim: %+v", stale)
	}
	// Nothing left: empty, not nil.
	none := h.ok(&Complete{TaskID: b.TaskID, Token: b.FencingToken, Claim: next}).(*AckResult)
	if !none.Accepted || none.Claimed == nil || len(none.Claimed) != 0 {
		t.Fatalf("complete b + claim with nothing ready: %+v", none)
	}
	// Inside a group-commit entry it runs isolated like any command that
	// may change records before it fails.
	if sharable(&Complete{Claim: next}) {
		t.Fatal("a completion with a claim must not share the entry's caches")
	}
}
