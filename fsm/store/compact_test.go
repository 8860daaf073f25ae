package store

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/testing/testutil"
)

// compactors counts badger's compactor goroutines.
func compactors(t testing.TB) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	return strings.Count(b.String(), "levelsController).runCompactor(")
}

// openGated opens a store whose compactors stop after idle and reports
// every stop (true) and start (false) on the returned channel.
func openGated(t *testing.T, idle time.Duration) (*BadgerStore, <-chan bool) {
	t.Helper()
	changes := make(chan bool, 16)
	bs, err := OpenBadger(t.TempDir(), BadgerOptions{CompactorIdle: idle, CompletionKey: []byte("done"),
		compactChanged: func(stopped bool) { changes <- stopped }})
	if err != nil {
		t.Fatal(err)
	}
	return bs, changes
}

// noCompactors waits for the stopped compactors' goroutines to end (each
// reports done just before it returns).
func noCompactors(t *testing.T, base int) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, time.Millisecond, "compactors to end", func() error {
		if n := compactors(t) - base; n != 0 {
			return fmt.Errorf("%d compactors run while stopped, want 0", n)
		}
		return nil
	})
}

func want(t *testing.T, changes <-chan bool, stopped bool) {
	t.Helper()
	select {
	case got := <-changes:
		if got != stopped {
			t.Fatalf("compactors stopped=%v, want stopped=%v", got, stopped)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("compactors never became stopped=%v", stopped)
	}
}

// An idle store's compactors stop (badger's wake every 50 ms each), and the
// next commit starts them again at once: the commit wakes the gate, it does
// not wait for the gate's next look.
func TestBadgerCompactorsStopWhenIdleAndACommitStartsThem(t *testing.T) {
	const base = 0
	noCompactors(t, base) // the stores of earlier tests are closed
	bs, changes := openGated(t, 20*time.Millisecond)
	defer bs.Close()
	want(t, changes, true)
	noCompactors(t, base)
	// From here the gate looks only every hour: the compactors can start
	// again only through the commit's wake-up. (Read by the gate after the
	// commit's wake-up, which happens after this write.)
	bs.compact.idle = time.Hour
	if err := bs.Commit([][]Write{{{Key: []byte("k"), Val: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	want(t, changes, false)
	// (A goroutine just started may not show in the profile yet.)
	testutil.Eventually(t, 5*time.Second, time.Millisecond, "compactors to start", func() error {
		if n := compactors(t) - base; n != 2 {
			return fmt.Errorf("%d compactors run after a commit, want 2", n)
		}
		return nil
	})
	r, done, err := bs.View()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if v, ok, err := r.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get(k) = %q, %v, %v", v, ok, err)
	}
}

// Replace (DropAll stops and starts the compactors itself) on a store whose
// compactors are stopped leaves exactly one set running, which stops again
// once the store is idle; Close works with them stopped.
func TestBadgerReplaceWithStoppedCompactorsStartsOneSet(t *testing.T) {
	const base = 0
	noCompactors(t, base) // the stores of earlier tests are closed
	bs, changes := openGated(t, 20*time.Millisecond)
	want(t, changes, true)
	err := bs.Replace(func(put func(k, v []byte) error) error {
		for i := range 100 {
			if err := put([]byte(fmt.Sprintf("k%03d", i)), []byte("v")); err != nil {
				return err
			}
		}
		return put([]byte("done"), []byte("1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	want(t, changes, false)
	// Two sets started (DropAll's and the gate's) would leave one running
	// after the next stop.
	want(t, changes, true)
	noCompactors(t, base)
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
}

// A negative CompactorIdle keeps badger's behaviour: the compactors always
// run.
func TestBadgerCompactorIdleNegativeNeverStops(t *testing.T) {
	bs, err := OpenBadger(t.TempDir(), BadgerOptions{CompactorIdle: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
}
