package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// countingStore counts the transactions and writes that reach the store
// under a WriteBehind and signals each transaction on commits; it counts
// the views taken of it and those still open too.
type countingStore struct {
	*MemStore
	txns, writes int
	commits      chan int // each transaction's write count, if non-nil
	limitBytes   int
	limitWrites  int
	taken, open  int // views
}

func (c *countingStore) View() (Reader, func(), error) {
	r, release, err := c.MemStore.View()
	if err != nil {
		return nil, nil, err
	}
	c.taken++
	c.open++
	return r, func() { c.open--; release() }, nil
}

func (c *countingStore) Commit(batches [][]Write) error {
	for _, b := range batches {
		c.txns++
		c.writes += len(b)
		if c.commits != nil {
			c.commits <- len(b)
		}
	}
	return c.MemStore.Commit(batches)
}

func (c *countingStore) TxnLimits() (int, int) { return c.limitBytes, c.limitWrites }

func get(t *testing.T, s interface {
	View() (Reader, func(), error)
}, key string) (string, bool) {
	t.Helper()
	r, release, err := s.View()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	v, ok, err := r.Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

func scanAll(t *testing.T, r Reader, prefix string, reverse bool) []string {
	t.Helper()
	var out []string
	if err := r.Scan([]byte(prefix), nil, reverse, func(k, v []byte) bool {
		out = append(out, string(k)+"="+string(v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func w(k, v string) Write {
	if v == "<del>" {
		return Write{Key: []byte(k)}
	}
	return Write{Key: []byte(k), Val: []byte(v)}
}

func TestWriteBehindViewsSeeEveryCommitAtOnce(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	_ = inner.MemStore.Commit([][]Write{{w("t/a", "old"), w("t/b", "b0"), w("t/c", "c0")}})
	wb := NewWriteBehind(inner, time.Hour)
	defer wb.Close()
	if err := wb.Commit([][]Write{{w("t/a", "1"), w("t/d", "d1")}, {w("t/b", "<del>")}}); err != nil {
		t.Fatal(err)
	}
	if err := wb.Commit([][]Write{{w("t/a", "2")}}); err != nil {
		t.Fatal(err)
	}
	if inner.txns != 0 {
		t.Fatalf("the window reached the store under it before it ended: %d transactions", inner.txns)
	}
	if v, ok := get(t, wb, "t/a"); !ok || v != "2" {
		t.Fatalf("t/a = %q, %v; want the last commit's 2", v, ok)
	}
	if _, ok := get(t, wb, "t/b"); ok {
		t.Fatal("a key deleted in the window is still visible")
	}
	r, release, _ := wb.View()
	defer release()
	if got, want := fmt.Sprint(scanAll(t, r, "t/", false)), "[t/a=2 t/c=c0 t/d=d1]"; got != want {
		t.Fatalf("scan = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(scanAll(t, r, "t/", true)), "[t/d=d1 t/c=c0 t/a=2]"; got != want {
		t.Fatalf("reverse scan = %s, want %s", got, want)
	}
}

func TestWriteBehindWritesAKeyOncePerWindow(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Hour)
	for i := range 50 {
		// Each commit rewrites the same record and a progress key.
		if err := wb.Commit([][]Write{{w("t/job", fmt.Sprint("v", i)), w("m/applied", fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Sync(); err != nil {
		t.Fatal(err)
	}
	if inner.txns != 1 || inner.writes != 2 {
		t.Fatalf("50 commits of 2 keys reached the store as %d transactions of %d writes; want 1 of 2", inner.txns, inner.writes)
	}
	if v, _ := get(t, inner.MemStore, "t/job"); v != "v49" {
		t.Fatalf("stored t/job = %q, want the last write v49", v)
	}
	_ = wb.Close()
}

// After a crash the store under it holds a prefix of the commits: every
// window whole or not at all, with the progress key of the same window.
func TestWriteBehindWindowsAreAtomicPrefixes(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Hour)
	for i := 1; i <= 10; i++ {
		if err := wb.Commit([][]Write{{w(fmt.Sprintf("r/%02d", i), "x"), w("m/applied", fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
		if i == 6 {
			if err := wb.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// "Crash": the window after 6 never reaches the store under it.
	v, _ := get(t, inner.MemStore, "m/applied")
	r, release, _ := inner.View()
	defer release()
	if got := len(scanAll(t, r, "r/", false)); v != "6" || got != 6 {
		t.Fatalf("store under it after the crash: applied %q with %d records; want 6 with 6", v, got)
	}
}

func TestWriteBehindEndsAWindowBeforeTheTransactionLimit(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore(), limitBytes: 1 << 20, limitWrites: 10}
	wb := NewWriteBehind(inner, time.Hour)
	defer wb.Close()
	for i := range 25 {
		if err := wb.Commit([][]Write{{w(fmt.Sprint("k", i), "v")}}); err != nil {
			t.Fatal(err)
		}
	}
	if inner.txns != 2 || inner.writes != 20 {
		t.Fatalf("25 distinct keys under a 10-write limit: %d transactions, %d writes; want 2 full ones so far", inner.txns, inner.writes)
	}
	if b, n := wb.TxnLimits(); b != 1<<20 || n != 10 {
		t.Fatalf("TxnLimits = %d, %d; want the store under it's", b, n)
	}
}

func TestWriteBehindWritesAnAgedWindowOnTheNextCommit(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Minute)
	defer wb.Close()
	if err := wb.Commit([][]Write{{w("k", "v")}}); err != nil {
		t.Fatal(err)
	}
	wb.mu.Lock()
	wb.timer.Stop()
	wb.since = wb.since.Add(-time.Minute) // the window is a minute old
	wb.mu.Unlock()
	if err := wb.Commit([][]Write{{w("j", "v")}}); err != nil {
		t.Fatal(err)
	}
	if inner.txns != 1 || inner.writes != 2 {
		t.Fatalf("an aged window was not written by the commit that found it: %d transactions, %d writes", inner.txns, inner.writes)
	}
}

func TestWriteBehindIdleWindowIsWrittenByItsTimer(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore(), commits: make(chan int, 1)}
	wb := NewWriteBehind(inner, 20*time.Millisecond)
	defer wb.Close()
	if err := wb.Commit([][]Write{{w("k", "v")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-inner.commits:
		if n != 1 {
			t.Fatalf("timer wrote %d keys, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an idle window was never written out")
	}
	wb.mu.Lock()
	pending := wb.pending.Len()
	wb.mu.Unlock()
	if pending != 0 {
		t.Fatal("the window is still pending after it was written")
	}
}

// A view is a point in time: a window written out (and the next one
// changed) after it was taken does not change what it reads.
func TestWriteBehindViewOutlivesItsWindow(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Hour)
	defer wb.Close()
	_ = wb.Commit([][]Write{{w("k", "1")}})
	r, release, _ := wb.View()
	defer release()
	_ = wb.Flush()
	_ = wb.Commit([][]Write{{w("k", "2"), w("j", "new")}})
	if v, _, _ := r.Get([]byte("k")); string(v) != "1" {
		t.Fatalf("old view reads k = %q, want 1", v)
	}
	if _, ok, _ := r.Get([]byte("j")); ok {
		t.Fatal("old view sees a later commit")
	}
	if v, _ := get(t, wb, "k"); v != "2" {
		t.Fatalf("new view reads k = %q, want 2", v)
	}
}

func TestWriteBehindApplyViewReadsTheWindowInPlace(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	_ = inner.MemStore.Commit([][]Write{{w("a", "0"), w("c", "0")}})
	wb := NewWriteBehind(inner, time.Hour)
	defer wb.Close()
	_ = wb.Commit([][]Write{{w("b", "1"), w("c", "<del>")}})
	r, release, err := wb.ApplyView()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if got, want := fmt.Sprint(scanAll(t, r, "", false)), "[a=0 b=1]"; got != want {
		t.Fatalf("apply view scan = %s, want %s", got, want)
	}
	if p, ok := r.(PrefixProber); !ok || !p.MayHavePrefix([]byte("b")) {
		t.Fatal("the apply view does not see the window's key under its prefix")
	}
}

func TestWriteBehindReplaceDropsTheWindow(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Hour)
	defer wb.Close()
	_ = wb.Commit([][]Write{{w("stale", "1")}})
	if err := wb.Replace(func(put func(k, v []byte) error) error { return put([]byte("fresh"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, wb, "stale"); ok {
		t.Fatal("a pending write survived Replace")
	}
	if v, _ := get(t, wb, "fresh"); v != "1" {
		t.Fatal("Replace's state is not visible")
	}
	if err := wb.Sync(); err != nil || inner.txns != 0 {
		t.Fatalf("Sync after Replace wrote %d transactions (err %v); the dropped window must not be written", inner.txns, err)
	}
}

func TestWriteBehindCloseWritesTheWindow(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Hour)
	_ = wb.Commit([][]Write{{w("k", "v")}})
	if err := wb.Close(); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, inner.MemStore, "k"); v != "v" {
		t.Fatal("Close lost the pending window")
	}
	if err := wb.Commit([][]Write{{w("k", "2")}}); err == nil {
		t.Fatal("a commit after Close succeeded")
	}
}

type failingStore struct{ *MemStore }

func (failingStore) Commit([][]Write) error { return fmt.Errorf("disk full") }

func TestWriteBehindFailedWindowFailsTheNextCalls(t *testing.T) {
	wb := NewWriteBehind(failingStore{NewMemStore()}, time.Hour)
	_ = wb.Commit([][]Write{{w("k", "v")}})
	if err := wb.Sync(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk full")) {
		t.Fatalf("Sync = %v, want the store's error", err)
	}
	if err := wb.Commit([][]Write{{w("k", "2")}}); err == nil {
		t.Fatal("a commit after a failed window succeeded")
	}
}

// The writer's view of the store under a WriteBehind is kept from one
// ApplyView to the next until a window is written (an entry then opens no
// read transaction of its own), and released once it is stale and no
// reader holds it; a reader still holding it goes on reading it.
func TestWriteBehindApplyViewKeepsItsInnerViewUntilAWindowIsWritten(t *testing.T) {
	inner := &countingStore{MemStore: NewMemStore()}
	wb := NewWriteBehind(inner, time.Hour)
	for i := range 3 {
		_, release, err := wb.ApplyView()
		if err != nil {
			t.Fatal(err)
		}
		release()
		release() // idempotent
		_ = wb.Commit([][]Write{{w(fmt.Sprint("k", i), "1")}})
	}
	if inner.taken != 1 || inner.open != 1 {
		t.Fatalf("three apply views within a window took %d inner views (%d open), want 1 (kept open)", inner.taken, inner.open)
	}
	held, release, _ := wb.ApplyView()
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if inner.open != 1 {
		t.Fatalf("a stale inner view still held was released (%d open)", inner.open)
	}
	if _, ok, _ := held.Get([]byte("k2")); !ok {
		t.Fatal("the held apply view lost the window it was taken with")
	}
	release()
	if inner.open != 0 {
		t.Fatalf("a stale inner view no one holds is still open (%d)", inner.open)
	}
	r, release2, _ := wb.ApplyView()
	if v, ok, _ := r.Get([]byte("k0")); !ok || string(v) != "1" {
		t.Fatal("the apply view after a written window does not read it from the store under it")
	}
	release2()
	if inner.taken != 2 {
		t.Fatalf("inner views taken = %d, want 2 (a new one after the window was written)", inner.taken)
	}
	if err := wb.Close(); err != nil {
		t.Fatal(err)
	}
	if inner.open != 0 {
		t.Fatalf("Close left %d inner views open", inner.open)
	}
}
