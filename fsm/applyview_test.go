package fsm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// The applier reads the index mirror in place (ApplyView) while other
// goroutines take views (snapshots of the mirror) at any time. Every view
// must hold whole commits: its run records (badger) and its runs-by-state
// index (the mirror) agree, and the states it sees only move forward.
// Run with -race: it also checks that reading the mirror in place does not
// race with the snapshots other readers take.
func TestViewsWhileApplyingSeeWholeCommits(t *testing.T) {
	f := openBadgerFSM(t)
	spec, err := domain.ParseSpec([]byte(`{"name":"q","tasks":[{"key":"job","type":"t"}]}`), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	const runs = 300
	apply := oneEntryEach(t, f, func(i uint64) int64 { return 1_700_000_000_000 + int64(i) })
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lastRecords := 0
			for !done.Load() {
				records, indexed := 0, 0
				err := f.View(func(r Reader) error {
					if err := r.Scan(pfxRun, nil, false, func(k, _ []byte) bool { records++; return true }); err != nil {
						return err
					}
					return r.Scan(pfxRunState, nil, false, func(k, _ []byte) bool { indexed++; return true })
				})
				switch {
				case err != nil:
					errs <- err
					return
				case records != indexed:
					errs <- fmt.Errorf("a view holds %d run records but %d runs-by-state keys: it mixed two commits", records, indexed)
					return
				case records < lastRecords:
					errs <- fmt.Errorf("a later view holds %d runs, an earlier one %d", records, lastRecords)
					return
				}
				lastRecords = records
			}
		}()
	}
	for i := range runs {
		if res, ok := apply(&Submit{ID: fmt.Sprintf("v%04d", i), Spec: spec}).(*SubmitResult); !ok || !res.Created {
			t.Fatalf("submit %d: %v", i, res)
		}
		if i%3 == 0 {
			apply(&Claim{Waiters: []Waiter{{WorkerID: "w", Types: []string{"t"}, Max: 2}}})
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(f.RunIDs()); got != runs {
		t.Fatalf("%d runs, want %d", got, runs)
	}
}
