package fsm

import (
	"fmt"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// BenchmarkFSMClaimComplete measures the state machine alone, per task: one
// claim entry and one complete entry, applied one at a time (no batching),
// over badger (as in production, with the in-memory index mirror) and over
// the in-memory store.
//
//	go test -run ^$ -bench FSMClaimComplete -benchmem ./fsm/
func BenchmarkFSMClaimComplete(b *testing.B) {
	for _, backend := range []string{"badger", "mem"} {
		b.Run(backend, func(b *testing.B) {
			var store Store = NewMemStore()
			if backend == "badger" {
				bs, err := OpenBadger(b.TempDir(), BadgerOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer bs.Close()
				if store, err = NewIndexedStore(bs); err != nil {
					b.Fatal(err)
				}
			}
			f, _ := New(store, Options{})
			h := &harness{t: b, f: f, now: 1_700_000_000_000}
			spec, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"t","type":"bench","input":{"n":1}}]}`), domain.DefaultLimits)
			for i := 0; i < b.N; i++ {
				h.ok(&Submit{ID: fmt.Sprintf("r%08d", i), Spec: spec})
			}
			h.log = nil
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := h.ok(&Claim{Waiters: []Waiter{{WorkerID: "w", Max: 1}}}).(*ClaimResult)
				c := res.Assigned[0][0]
				h.ok(&Complete{TaskID: c.TaskID, Token: c.FencingToken})
				h.log = h.log[:0]
			}
		})
	}
}

// BenchmarkFSMClaimCompleteBatched applies 64 claims or completes per
// ApplyBatch, the shape raft's batching produces under load.
func BenchmarkFSMClaimCompleteBatched(b *testing.B) {
	bs, err := OpenBadger(b.TempDir(), BadgerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close()
	store, _ := NewIndexedStore(bs)
	f, _ := New(store, Options{})
	spec, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"t","type":"bench"}]}`), domain.DefaultLimits)
	idx := uint64(0)
	batch := func(cmds []Command) []any {
		var es []Entry
		for _, c := range cmds {
			c.Stamp(1_700_000_000_000)
			buf, _ := Encode(c)
			idx++
			es = append(es, Entry{Index: idx, Data: buf})
		}
		return f.ApplyBatch(es)
	}
	var subs []Command
	for i := 0; i < b.N; i++ {
		subs = append(subs, &Submit{ID: fmt.Sprintf("r%08d", i), Spec: spec})
		if len(subs) == 64 || i == b.N-1 {
			batch(subs)
			subs = nil
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(64, b.N-done)
		var claims []Command
		for i := 0; i < n; i++ {
			claims = append(claims, &Claim{Waiters: []Waiter{{WorkerID: "w", Max: 1}}})
		}
		var completes []Command
		for _, r := range batch(claims) {
			for _, c := range r.(*ClaimResult).Assigned[0] {
				completes = append(completes, &Complete{TaskID: c.TaskID, Token: c.FencingToken})
			}
		}
		batch(completes)
		done += n
	}
}
