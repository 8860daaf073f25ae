package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Fuzz targets of the state machine (issue 10): Decode + Apply on two
// replicas, and ReadSnapshot / Restore. The seed corpora are in
// testdata/fuzz/<target>/ and also run as plain tests; run a target with
//
//	go test -run '^$' -fuzz FuzzApply -fuzztime 2m -parallel 1 ./fsm/
//
// FLOWD_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./fsm/ rewrites
// the committed seed files from the scenarios below.

// fuzzMaxEntries bounds the entries one fuzz input is split into.
const fuzzMaxEntries = 48

// splitEntries cuts a fuzz input into entries: uvarint length, then that
// many bytes (clamped to what is left); the first byte of each is the type
// byte, so a mutation of it reaches every command type.
func splitEntries(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < fuzzMaxEntries {
		l, n := binary.Uvarint(data)
		if n <= 0 {
			out = append(out, data)
			break
		}
		data = data[n:]
		l = min(l, uint64(len(data)))
		out = append(out, data[:l])
		data = data[l:]
	}
	return out
}

// joinEntries is the inverse of splitEntries (for seeds).
func joinEntries(entries []Entry) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.Data)))
		b = append(b, e.Data...)
	}
	return b
}

// renderResult renders an Apply result for comparison between replicas;
// it fails on a recovered panic (Apply must not panic on any input).
func renderResult(t *testing.T, i int, res any) string {
	t.Helper()
	switch r := res.(type) {
	case nil:
		return "nil"
	case error:
		if errors.Is(r, ErrApplyPanic) {
			t.Fatalf("entry %d: Apply panicked: %v", i, r)
		}
		return "error: " + r.Error()
	case *MultiResult:
		parts := make([]string, len(r.Results))
		for j, sub := range r.Results {
			parts[j] = renderResult(t, i, sub)
		}
		return "multi[" + strings.Join(parts, "; ") + "]"
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("entry %d: result %T does not marshal: %v", i, res, err)
	}
	return fmt.Sprintf("%T %s", res, b)
}

func newFuzzFSM(t *testing.T, indexed bool) *FSM {
	t.Helper()
	var st store.Store = store.NewMemStore()
	if indexed {
		idx, err := NewIndexedStore(st)
		if err != nil {
			t.Fatal(err)
		}
		st = idx
	}
	f, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func fuzzDigest(t *testing.T, f *FSM) string {
	t.Helper()
	d, _, err := f.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// FuzzApply splits the input into log entries and applies each, one entry
// per ApplyBatch, to two fresh replicas: an FSM over the MemStore and one
// over the IndexedStore (memory-mirrored hot indexes, derived indexes
// rebuilt) over a MemStore. Neither may panic (a recovered panic is an
// ErrApplyPanic result, a failure here), every result is a value or an
// error and the same on both, and the digests are equal after every entry.
// At the end a third replica that applied the whole log in one batch, and
// a fourth restored from the first one's snapshot, have the same digest.
func FuzzApply(f *testing.F) {
	for _, s := range fuzzApplySeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmds := splitEntries(data)
		plain, indexed := newFuzzFSM(t, false), newFuzzFSM(t, true)
		log := make([]Entry, len(cmds))
		for i, c := range cmds {
			e := Entry{Index: uint64(i + 1), Data: c}
			log[i] = e
			r1 := renderResult(t, i, plain.Apply(e))
			r2 := renderResult(t, i, indexed.Apply(e))
			if r1 != r2 {
				t.Fatalf("entry %d (%q): results differ:\nmemstore: %s\nindexed:  %s", i, c, r1, r2)
			}
			if d1, d2 := fuzzDigest(t, plain), fuzzDigest(t, indexed); d1 != d2 {
				t.Fatalf("entry %d (%q): digests differ: memstore %s, indexed %s", i, c, d1, d2)
			}
		}
		want := fuzzDigest(t, plain)

		batched := newFuzzFSM(t, true)
		for i, res := range batched.ApplyBatch(log) {
			renderResult(t, i, res)
		}
		if got := fuzzDigest(t, batched); got != want {
			t.Fatalf("one batch of %d entries: digest %s, entry by entry %s", len(log), got, want)
		}

		snap, err := plain.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = snap.WriteTo(&buf)
		snap.Release()
		if err != nil {
			t.Fatal(err)
		}
		restored := newFuzzFSM(t, true)
		if err := restored.Restore(&buf); err != nil {
			t.Fatalf("restoring a snapshot of the state: %v", err)
		}
		if got := fuzzDigest(t, restored); got != want {
			t.Fatalf("restored from a snapshot: digest %s, want %s", got, want)
		}
	})
}

// fuzzScenarios are the seed logs: real commands, encoded by Encode, as the
// harness applies them (the same indexes, so the tokens are right).
func fuzzScenarios(tb testing.TB) map[string][]Entry {
	out := map[string][]Entry{}

	h := newHarness(tb)
	derivedScenario(h)
	out["derived"] = h.log

	h = newHarness(tb)
	h.submit("d1", diamond)
	a := h.claimOne("w1")
	h.ok(&Heartbeat{TaskID: a.TaskID, Token: a.FencingToken})
	h.complete(a, `{"v":1}`)
	got := h.claim("w2", 2)
	h.fail(got[0], "boom", true)
	h.complete(got[1], `2`)
	h.ok(NewRunVerb(MsgCancelRun, "d1"))
	out["diamond"] = h.log

	h = newHarness(tb)
	sub := func(c Command) []byte {
		c.Stamp(h.now)
		b, err := Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	h.submit("m0", `{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":3,"initial_backoff_ms":10}}]}`)
	c := h.claimOne("w")
	s1 := &Submit{ID: "m1"}
	s1.Spec = fuzzSpec(tb, `{"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)
	h.ok(&Multi{Cmds: [][]byte{
		sub(s1),
		sub(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Result: json.RawMessage(`"ok"`),
			Claim: &Waiter{WorkerID: "w", Max: 1, RequestID: "r1"}}),
		sub(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken + 1}),
		sub(&Noop{}),
		{},
	}})
	h.ok(&Claim{Waiters: []Waiter{{WorkerID: "w3", Max: 4, RequestID: "q"}, {WorkerID: "w4", Max: 1}}})
	h.now += 10 * 60_000
	h.ok(&Reap{})
	h.ok(&Tick{})
	h.ok(&QueueSet{Name: "default", Concurrency: 2})
	h.ok(&GC{})
	out["multi"] = h.log

	h = newHarness(tb)
	h.submit("x", `{"tasks":[{"key":"a","type":"t"}]}`)
	h.apply(&Fail{TaskID: "x/a", Token: 99, Error: "stale"})
	h.index++
	h.log = append(h.log, Entry{Index: h.index, Data: []byte{byte(MsgComplete), '{'}})
	h.index++
	h.log = append(h.log, Entry{Index: h.index, Data: EncodeDigestMark()})
	out["odd"] = h.log
	fuzzScenariosLater(tb, out) // fuzz_seeds_test.go: commands 24-55
	return out
}

func fuzzSpec(tb testing.TB, s string) domain.Spec {
	tb.Helper()
	sp, err := domain.ParseSpec([]byte(s), domain.DefaultLimits)
	if err != nil {
		tb.Fatal(err)
	}
	return sp
}

func fuzzApplySeeds(tb testing.TB) [][]byte {
	sc := fuzzScenarios(tb)
	var out [][]byte
	for _, name := range fuzzApplySeedNames {
		out = append(out, joinEntries(sc[name]))
	}
	return out
}

// fuzzSnapshotSeeds are real snapshots of small states, and the crafted
// file of issue 11.
func fuzzSnapshotSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, name := range []string{"diamond", "multi"} {
		f, err := New(store.NewMemStore(), Options{})
		if err != nil {
			tb.Fatal(err)
		}
		f.ApplyBatch(fuzzScenarios(tb)[name])
		snap, err := f.Snapshot()
		if err != nil {
			tb.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := snap.WriteTo(&buf); err != nil {
			tb.Fatal(err)
		}
		snap.Release()
		out = append(out, buf.Bytes())
	}
	return append(out, craftedSnapshot(), append([]byte{}, snapMagic...))
}

// FuzzReadSnapshot: arbitrary bytes give a value or an error, never a
// panic; a declared length is never trusted, so a call allocates at most a
// small multiple of the input plus fixed buffers (bufio's 256 KiB and one
// 64 KiB read step); what it reads back re-encodes to a snapshot that reads
// the same; and restoring it into an FSM over the IndexedStore (which
// decodes the records to rebuild its indexes) is a value or an error too.
func FuzzReadSnapshot(f *testing.F) {
	for _, s := range fuzzSnapshotSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var kvs [][2][]byte
		before := totalAlloc() // cumulative: no GC needed

		err := ReadSnapshot(bytes.NewReader(data), func(k, v []byte) error {
			kvs = append(kvs, [2][]byte{k, v})
			return nil
		})
		alloc := totalAlloc() - before
		if limit := uint64(8*len(data)) + 1<<20; alloc > limit {
			t.Fatalf("ReadSnapshot of %d bytes allocated %d bytes (limit %d)", len(data), alloc, limit)
		}
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v is not ErrBadSnapshot", err)
			}
		} else {
			enc := append([]byte{}, snapMagic...)
			for _, kv := range kvs {
				enc = append(enc, recKV)
				enc = binary.AppendUvarint(enc, uint64(len(kv[0])))
				enc = append(enc, kv[0]...)
				enc = binary.AppendUvarint(enc, uint64(len(kv[1])))
				enc = append(enc, kv[1]...)
			}
			enc = binary.AppendUvarint(append(enc, recTrailer), uint64(len(kvs)))
			i := 0
			if err := ReadSnapshot(bytes.NewReader(enc), func(k, v []byte) error {
				if i >= len(kvs) || !bytes.Equal(k, kvs[i][0]) || !bytes.Equal(v, kvs[i][1]) {
					return fmt.Errorf("record %d differs", i)
				}
				i++
				return nil
			}); err != nil || i != len(kvs) {
				t.Fatalf("re-encoded snapshot of %d records: %v after %d", len(kvs), err, i)
			}
		}
		fsm := newFuzzFSM(t, true)
		if err := fsm.Restore(bytes.NewReader(data)); err == nil {
			_ = fuzzDigest(t, fsm)
		}
	})
}

// TestWriteFuzzSeeds rewrites the committed seed corpora from the
// scenarios (only with FLOWD_WRITE_FUZZ_SEEDS=1).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("FLOWD_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set FLOWD_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz seeds")
	}
	write := func(target, name string, data []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := fuzzScenarios(t)
	for _, name := range fuzzApplySeedNames {
		write("FuzzApply", "seed-"+name, joinEntries(sc[name]))
	}
	for i, s := range fuzzSnapshotSeeds(t) {
		write("FuzzReadSnapshot", fmt.Sprintf("seed-%d", i), s)
	}
}
