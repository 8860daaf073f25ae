package fsm

import (
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

func claimReq(h *harness, worker, req string, max int, types ...string) []Claimed {
	h.t.Helper()
	res := h.ok(&Claim{Waiters: []Waiter{{WorkerID: worker, Types: types, Max: max, RequestID: req}}}).(*ClaimResult)
	return res.Assigned[0]
}

// Invariant: a re-sent claim (same worker and request id) gets the leases
// its first delivery granted, with the same tokens, and leases nothing
// more; a new request id leases new tasks; once a lease ends the request
// id holds nothing.
func TestClaimRequestIDReturnsSameLeases(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"r1", "r2", "r3"} {
		h.submit(id, `{"tasks":[{"key":"a","type":"t"}]}`)
	}
	first := claimReq(h, "w", "req-A", 2, "t")
	if len(first) != 2 {
		t.Fatalf("first claim leased %d tasks, want 2", len(first))
	}
	again := claimReq(h, "w", "req-A", 2, "t")
	if len(again) != 2 {
		t.Fatalf("re-sent claim answered %d tasks, want the same 2", len(again))
	}
	byID := map[string]Claimed{}
	for _, c := range first {
		byID[c.TaskID] = c
	}
	for _, c := range again {
		f, ok := byID[c.TaskID]
		if !ok || f.FencingToken != c.FencingToken || f.Attempt != c.Attempt || f.LeaseExpiresAt != c.LeaseExpiresAt {
			t.Fatalf("re-sent claim answered %+v, first answer %+v", c, f)
		}
	}
	// The read the daemon answers a re-sent long poll with agrees.
	read, err := h.f.ClaimedBy("w", "req-A")
	if err != nil || len(read) != 2 {
		t.Fatalf("ClaimedBy: %+v %v", read, err)
	}
	for _, c := range read {
		if f := byID[c.TaskID]; f.FencingToken != c.FencingToken || f.Type != c.Type || string(f.RunInput) != string(c.RunInput) {
			t.Fatalf("ClaimedBy answered %+v, the claim %+v", c, f)
		}
	}
	for _, c := range first {
		if tk := h.task(c.RunID, c.TaskKey); tk.Attempt != 1 || len(tk.Attempts) != 1 {
			t.Fatalf("%s: attempt %d after a re-sent claim, want 1", c.TaskID, tk.Attempt)
		}
	}
	// Another worker with the same request id is another request.
	if other := claimReq(h, "w2", "req-A", 2, "t"); len(other) != 1 {
		t.Fatalf("another worker's claim got %d tasks, want the 1 left", len(other))
	}
	// The same request id after its leases ended holds nothing: a complete
	// and a cancelled run end them.
	if !h.complete(first[0], `1`) {
		t.Fatal("complete refused")
	}
	if !h.verb(MsgCancelRun, first[1].RunID) {
		t.Fatal("cancel refused")
	}
	h.submit("r4", `{"tasks":[{"key":"a","type":"t"}]}`)
	late := claimReq(h, "w", "req-A", 2, "t")
	if len(late) != 1 || late[0].RunID != "r4" {
		t.Fatalf("request id whose leases ended: %+v, want r4's task leased anew", late)
	}
}

// A completion whose claim carries a request id and is re-sent (the
// forwarder retries after an unknown outcome) is accepted again and answers
// the same next task instead of leasing another.
func TestCompleteWithClaimResentLeasesNothingMore(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"r1", "r2", "r3"} {
		h.submit(id, `{"tasks":[{"key":"a","type":"t"}]}`)
	}
	c := h.claim("w", 1, "t")[0]
	cmd := &Complete{TaskID: c.TaskID, Token: c.FencingToken, Result: []byte(`1`),
		Claim: &Waiter{WorkerID: "w", Types: []string{"t"}, Max: 1, RequestID: "next-1"}}
	a1 := h.ok(cmd).(*AckResult)
	a2 := h.ok(cmd).(*AckResult)
	if !a1.Accepted || !a2.Accepted || len(a1.Claimed) != 1 || len(a2.Claimed) != 1 ||
		a1.Claimed[0].TaskID != a2.Claimed[0].TaskID || a1.Claimed[0].FencingToken != a2.Claimed[0].FencingToken {
		t.Fatalf("first %+v, re-sent %+v", a1, a2)
	}
	ready := 0
	for _, id := range []string{"r1", "r2", "r3"} {
		if h.taskState(id, "a") == domain.TaskReady {
			ready++
		}
	}
	if ready != 1 {
		t.Fatalf("%d tasks still ready after the re-sent completion, want 1", ready)
	}
}

// A retry of the call that created a run (same nonce) is answered
// created:true; another call with the same run id created:false.
func TestSubmitRetryWithSameNonceIsCreated(t *testing.T) {
	h := newHarness(t)
	spec, err := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"t"}]}`), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	sub := func(nonce string) *SubmitResult {
		return h.ok(&Submit{ID: "r1", Spec: spec, Nonce: nonce}).(*SubmitResult)
	}
	if r := sub("n1"); !r.Created {
		t.Fatal("first submit not created")
	}
	if r := sub("n1"); !r.Created {
		t.Fatal("retry of the creating call (same nonce) answered created:false")
	}
	if r := sub("n2"); r.Created {
		t.Fatal("another call with the same id answered created:true")
	}
	if r := sub(""); r.Created {
		t.Fatal("a call without a nonce answered created:true for an existing run")
	}
}
