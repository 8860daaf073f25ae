package fsm

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// harness applies commands to an FSM over a MemStore, one entry each, with
// a controllable leader clock. It mirrors nomad's testFSM.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   int64
	log   []Entry // everything applied, for replay
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	f, err := New(store.NewMemStore(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, f: f, now: 1_700_000_000_000}
}

// encode stamps cmd with the harness clock and encodes it, as a sub-command
// of a Multi the test builds.
func (h *harness) encode(cmd Command) []byte {
	h.t.Helper()
	cmd.Stamp(h.now)
	b, err := Encode(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// apply stamps cmd with the harness clock, applies it as the next entry and
// returns the result.
func (h *harness) apply(cmd Command) any {
	h.t.Helper()
	cmd.Stamp(h.now)
	buf, err := Encode(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	h.index++
	e := Entry{Index: h.index, Data: buf}
	h.log = append(h.log, e)
	return h.f.Apply(e)
}

// ok applies cmd and fails the test on an error result.
func (h *harness) ok(cmd Command) any {
	h.t.Helper()
	res := h.apply(cmd)
	if err, isErr := res.(error); isErr {
		h.t.Fatalf("%s: %v", cmd.Type(), err)
	}
	return res
}

func (h *harness) submit(id string, spec string) *SubmitResult {
	h.t.Helper()
	s, err := domain.ParseSpec([]byte(spec), domain.DefaultLimits)
	if err != nil {
		h.t.Fatalf("spec: %v", err)
	}
	return h.ok(&Submit{ID: id, Spec: s}).(*SubmitResult)
}

func (h *harness) claim(worker string, max int, types ...string) []Claimed {
	h.t.Helper()
	res := h.ok(&Claim{Waiters: []Waiter{{WorkerID: worker, Max: max, Types: types}}}).(*ClaimResult)
	return res.Assigned[0]
}

func (h *harness) claimOne(worker string) Claimed {
	h.t.Helper()
	got := h.claim(worker, 1)
	if len(got) != 1 {
		h.t.Fatalf("claim by %s: got %d tasks, want 1", worker, len(got))
	}
	return got[0]
}

func (h *harness) complete(c Claimed, result string) bool {
	h.t.Helper()
	var raw json.RawMessage
	if result != "" {
		raw = json.RawMessage(result)
	}
	return h.ok(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Result: raw}).(*AckResult).Accepted
}

func (h *harness) fail(c Claimed, msg string, retryable bool) bool {
	h.t.Helper()
	return h.ok(&Fail{TaskID: c.TaskID, Token: c.FencingToken, Error: msg, Retryable: &retryable}).(*AckResult).Accepted
}

func (h *harness) run(id string) (*Run, map[string]*Task) {
	h.t.Helper()
	r, tasks, err := h.f.GetRun(id)
	if err != nil {
		h.t.Fatal(err)
	}
	m := map[string]*Task{}
	for _, t := range tasks {
		m[t.Key] = t
	}
	return r, m
}

func (h *harness) runState(id string) domain.RunState {
	h.t.Helper()
	r, _ := h.run(id)
	return r.State
}

func (h *harness) taskState(run, key string) domain.TaskState {
	h.t.Helper()
	_, ts := h.run(run)
	return ts[key].State
}

func (h *harness) digest() string {
	h.t.Helper()
	d, _, err := h.f.Digest()
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func wantErr(t testing.TB, res any, target error) {
	t.Helper()
	err, ok := res.(error)
	if !ok {
		t.Fatalf("result %#v, want error %v", res, target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

const diamond = `{"name":"diamond","tasks":[
 {"key":"a","type":"echo"},
 {"key":"b","type":"echo","deps":["a"]},
 {"key":"c","type":"echo","deps":["a"]},
 {"key":"d","type":"echo","deps":["b","c"]}]}`

// openBadgerFSM is an FSM on a badger store in a temporary directory with
// the index mirror in front, as an agent runs it; a store failure fails tb.
func openBadgerFSM(tb testing.TB) *FSM {
	tb.Helper()
	bs, err := OpenBadger(tb.TempDir(), store.BadgerOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { bs.Close() })
	f, _ := indexedFSM(tb, bs)
	f.OnFatal = func(err error) { tb.Fatalf("store failed: %v", err) }
	return f
}

// indexedFSM is an FSM on st with the index mirror in front, and that
// indexed store.
func indexedFSM(tb testing.TB, st store.Store) (*FSM, *IndexedStore) {
	tb.Helper()
	idx, err := NewIndexedStore(st)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := New(idx, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return f, idx
}

// oneEntryEach returns a function that applies each command it is given as
// an entry of its own, at the next index, stamped at stamp(index).
func oneEntryEach(tb testing.TB, f *FSM, stamp func(index uint64) int64) func(Command) any {
	var index uint64
	return func(c Command) any {
		index++
		c.Stamp(stamp(index))
		buf, err := Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		return f.ApplyBatch([]Entry{{Index: index, Data: buf}})[0]
	}
}
