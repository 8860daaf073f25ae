package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Helpers for the semantics tests.

// newSem returns a harness whose log is re-applied into a fresh FSM, in
// batches of random sizes, when the test ends: the digests must match.
func newSem(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	t.Cleanup(func() {
		if !t.Failed() {
			checkReplay(t, h, 3, uint64(len(h.log)))
		}
	})
	return h
}

// checkReplay proves determinism: the harness log, applied with ApplyBatch
// in chunks of random sizes into fresh FSMs, yields the same digest. Round
// 0 applies one entry per batch; later rounds use bigger random chunks.
func checkReplay(t testing.TB, h *harness, rounds int, seed uint64) {
	t.Helper()
	want := h.digest()
	for round := range uint64(rounds) {
		rng := rand.New(rand.NewPCG(round, seed))
		f, err := New(store.NewMemStore(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(h.log); {
			j := min(i+1+rng.IntN(1+int(round)*8), len(h.log))
			f.ApplyBatch(h.log[i:j])
			i = j
		}
		got, idx, err := f.Digest()
		if err != nil || got != want || idx != h.index {
			t.Fatalf("replay round %d of %d entries: digest %s at %d, want %s at %d (%v)", round, len(h.log), got, idx, want, h.index, err)
		}
	}
}

// stateDigest hashes every key except the applied index: what a rejected
// entry must leave untouched.
func stateDigest(t testing.TB, f *FSM) string {
	t.Helper()
	sum := sha256.New()
	err := f.View(func(r Reader) error {
		return r.Scan(nil, nil, false, func(k, v []byte) bool {
			if !bytes.Equal(k, keyApplied) {
				fmt.Fprintf(sum, "%d:%s=%d:%s;", len(k), k, len(v), v)
			}
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sum.Sum(nil))
}

func (h *harness) verb(msg MsgType, id string) bool {
	h.t.Helper()
	return h.ok(NewRunVerb(msg, id)).(*ChangedResult).Changed
}

func (h *harness) task(run, key string) *Task {
	h.t.Helper()
	_, ts := h.run(run)
	if ts[key] == nil {
		h.t.Fatalf("no task %s/%s", run, key)
	}
	return ts[key]
}

func (h *harness) wantRun(id string, want domain.RunState) {
	h.t.Helper()
	if got := h.runState(id); got != want {
		h.t.Fatalf("run %s is %s, want %s", id, got, want)
	}
}

func (h *harness) wantTasks(run string, want map[string]domain.TaskState) {
	h.t.Helper()
	_, ts := h.run(run)
	for k, s := range want {
		if ts[k] == nil || ts[k].State != s {
			h.t.Fatalf("task %s/%s: %+v, want state %s", run, k, ts[k], s)
		}
	}
}

func (h *harness) wantNoClaim(worker string, types ...string) {
	h.t.Helper()
	if got := h.claim(worker, 100, types...); len(got) != 0 {
		h.t.Fatalf("claim got %v, want nothing", claimKeys(got))
	}
}

func (h *harness) heartbeat(c Claimed) bool {
	h.t.Helper()
	return h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken}).(*AckResult).Accepted
}

func claimKeys(cs []Claimed) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.TaskKey
	}
	slices.Sort(out)
	return out
}

// forward claims and completes every task of the run in dependency order
// until none is ready, each with result "r<key>".
func (h *harness) forward(worker string, keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		c := h.claimOne(worker)
		if c.TaskKey != k {
			h.t.Fatalf("claimed %s, want %s", c.TaskKey, k)
		}
		if !h.complete(c, `"r`+k+`"`) {
			h.t.Fatalf("complete %s rejected", k)
		}
	}
}

// drainCompensations claims every ready compensation (type undo), checks
// each claim against the task record, completes them, and repeats; it
// returns the keys claimed per round.
func (h *harness) drainCompensations(run string) [][]string {
	h.t.Helper()
	var rounds [][]string
	for {
		cs := h.claim("comp", 100, "undo")
		if len(cs) == 0 {
			return rounds
		}
		for _, c := range cs {
			tk := h.task(run, c.TaskKey)
			if !c.Compensation || c.Type != "undo" || !bytes.Equal(c.Result, tk.Result) || c.Attempt != tk.Comp.Attempt {
				h.t.Fatalf("compensation claim %+v for task %+v", c, tk)
			}
			if tk.State != domain.TaskReverting || tk.Comp.Phase != CompRunning || tk.LeaseOwner != "comp" {
				h.t.Fatalf("task under compensation: %+v", tk)
			}
		}
		for _, c := range cs {
			if !h.complete(c, "") {
				h.t.Fatalf("compensation of %s rejected", c.TaskKey)
			}
		}
		rounds = append(rounds, claimKeys(cs))
	}
}

func runEvents(h *harness, run string) []Event {
	h.t.Helper()
	evs, _, err := h.f.Events(0, run, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func hasTransition(evs []Event, kind, key, transition string) bool {
	for _, e := range evs {
		if e.Kind == kind && e.TaskKey == key && e.Transition == transition {
			return true
		}
	}
	return false
}
