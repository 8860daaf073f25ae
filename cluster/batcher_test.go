package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/fsm"
)

// Concurrent grouped proposals each get their own result, and share
// entries: fewer log entries than commands.
func TestProposeGroupedCoalesces(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.DisableLoops = true })
	spec := mustSpec(t, `{"tasks":[{"key":"x","type":"t"}]}`)
	const n = 60
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	idx := make([]uint64, n)
	errs := make([]error, n)
	results := make([]any, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], idx[i], errs[i] = l.ProposeGrouped(ctx, &fsm.Submit{ID: fmt.Sprintf("g%02d", i), Spec: spec})
		}(i)
	}
	wg.Wait()
	entries := map[uint64]bool{}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("%d: %v", i, errs[i])
		}
		if r := results[i].(*fsm.SubmitResult); r.ID != fmt.Sprintf("g%02d", i) || !r.Created {
			t.Fatalf("%d got %+v", i, r)
		}
		entries[idx[i]] = true
	}
	if len(entries) >= n {
		t.Fatalf("%d commands used %d entries: nothing was grouped", n, len(entries))
	}
	// A rejected command in a group fails alone.
	res, _, err := l.ProposeGrouped(ctx, &fsm.Submit{ID: "bad/id", Spec: spec})
	if err == nil {
		t.Fatalf("invalid id accepted: %+v", res)
	}
	if got := len(l.FSM().RunIDs()); got != n {
		t.Fatalf("%d runs, want %d", got, n)
	}
	assertConverged(t, c)
}
