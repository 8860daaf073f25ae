package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Commit returns before badger has written (the write leaves the commit
// round trip), so the store must still read its own commits: a view taken
// after Commit returns sees it, every view sees whole commits in order
// (two keys written together are never seen apart, a counter never goes
// back), and Sync and Close wait for what is still being written.
func TestBadgerCommitsAreVisibleOnceCommitReturns(t *testing.T) {
	bs, err := OpenBadger(t.TempDir(), BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(r Reader, k string) string {
		v, ok, err := r.Get([]byte(k))
		if err != nil {
			t.Error(err)
		}
		if !ok {
			return ""
		}
		return string(v)
	}
	const n = 400
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reader racing the commits
		defer wg.Done()
		last := -1
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, done, err := bs.View()
			if err != nil {
				t.Error(err)
				return
			}
			a, b := get(r, "pair/a"), get(r, "pair/b")
			done()
			if a != b {
				t.Errorf("a view saw half a commit: a=%q b=%q", a, b)
				return
			}
			var i int
			if a != "" {
				fmt.Sscan(a, &i)
				if i < last {
					t.Errorf("a view went back from commit %d to %d", last, i)
					return
				}
				last = i
			}
		}
	}()
	wg.Add(1)
	go func() { // snapshots sync while the commits go on
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := bs.Sync(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		v := []byte(fmt.Sprint(i))
		key := []byte(fmt.Sprintf("k/%04d", i))
		if err := bs.Commit([][]Write{{{Key: []byte("pair/a"), Val: v}, {Key: []byte("pair/b"), Val: v}, {Key: key, Val: v}}}); err != nil {
			t.Fatal(err)
		}
		r, done, err := bs.View()
		if err != nil {
			t.Fatal(err)
		}
		got := get(r, string(key))
		done()
		if got != string(v) {
			t.Fatalf("commit %d: a view taken after Commit returned read %q, want %q", i, got, v)
		}
	}
	close(stop)
	wg.Wait()
	// A large commit in several transactions, then Sync and Close at once.
	var big [][]Write
	for j := 0; j < 4; j++ {
		var w []Write
		for k := 0; k < 500; k++ {
			w = append(w, Write{Key: []byte(fmt.Sprintf("big/%d/%03d", j, k)), Val: bytes.Repeat([]byte{byte(j)}, 100)})
		}
		big = append(big, w)
	}
	if err := bs.Commit(big); err != nil {
		t.Fatal(err)
	}
	if err := bs.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
}

// Settling waits for the commits issued before it, not for later ones
// (a Sync must not wait out an applier that goes on committing), and
// returns the first failure.
func TestInflightSettlesWhatWasIssuedBefore(t *testing.T) {
	var f inflight
	a, b := f.issue(), f.issue()
	settled := make(chan error, 1)
	go func() { settled <- f.settleUpTo(b) }()
	c := f.issue()
	f.done(a, nil)
	select {
	case err := <-settled:
		t.Fatalf("settled (%v) with commit %d still being written", err, b)
	default:
	}
	boom := errors.New("boom")
	if !f.done(b, boom) {
		t.Fatal("the first failure was not reported as first")
	}
	if err := <-settled; err != boom {
		t.Fatalf("settle returned %v, want the failure", err)
	}
	if f.done(c, errors.New("later")) {
		t.Fatal("a second failure was reported as first")
	}
	if err := f.failed(); err != boom {
		t.Fatalf("failed() = %v, want the first failure", err)
	}
}

// A write badger fails after Commit returned stops the node (OnError, once)
// and fails the next Commit and Sync, so nothing is built on state the
// store does not hold.
func TestBadgerFailedWriteStopsAndFailsTheNextCommit(t *testing.T) {
	bs, err := OpenBadger(t.TempDir(), BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	var reported []error
	bs.OnError(func(err error) { reported = append(reported, err) })
	seq := bs.writing.issue() // a commit in flight that badger then fails
	bs.written(seq, errors.New("disk gone"))
	bs.written(bs.writing.issue(), errors.New("again"))
	if len(reported) != 1 {
		t.Fatalf("OnError called %d times, want once: %v", len(reported), reported)
	}
	var se *StorageError
	if !errors.As(reported[0], &se) {
		t.Fatalf("reported %T %v, want a *StorageError", reported[0], reported[0])
	}
	if err := bs.Commit([][]Write{{{Key: []byte("k"), Val: []byte("v")}}}); err == nil {
		t.Fatal("Commit after a failed write succeeded")
	}
	if err := bs.Sync(); err == nil {
		t.Fatal("Sync after a failed write succeeded")
	}
}

// Replace writes the completion key after everything else: a Replace cut
// short leaves a store without it, a complete one holds it and the rest.
func TestBadgerReplaceWritesTheCompletionKeyLast(t *testing.T) {
	done := []byte("meta/complete")
	bs, err := OpenBadger(t.TempDir(), BadgerOptions{CompletionKey: done})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	has := func(k string) bool {
		t.Helper()
		r, release, err := bs.View()
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		_, ok, err := r.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	cut := errors.New("cut short")
	err = bs.Replace(func(put func(k, v []byte) error) error {
		if err := put(done, []byte("1")); err != nil { // first in the load
			return err
		}
		if err := put([]byte("a/1"), []byte("x")); err != nil {
			return err
		}
		return cut
	})
	if !errors.Is(err, cut) {
		t.Fatalf("Replace returned %v, want the load's error", err)
	}
	if has(string(done)) {
		t.Fatal("a Replace cut short left the completion key")
	}
	if err := bs.Replace(func(put func(k, v []byte) error) error {
		if err := put(done, []byte("1")); err != nil {
			return err
		}
		return put([]byte("a/1"), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	if !has(string(done)) || !has("a/1") {
		t.Fatal("a complete Replace lacks the completion key or the data")
	}
}

// MaxTxnBytes sizes the memtable so one transaction of that many bytes
// fits; without it the default memtable's limit stands.
func TestBadgerTxnLimitsTakeMaxTxnBytes(t *testing.T) {
	for _, need := range []int{0, 8 << 20, 24 << 20} {
		bs, err := OpenBadger("", BadgerOptions{InMemory: true, MaxTxnBytes: need})
		if err != nil {
			t.Fatal(err)
		}
		got, writes := bs.TxnLimits()
		bs.Close()
		if got < need || writes <= 0 {
			t.Errorf("MaxTxnBytes %d: TxnLimits %d bytes, %d writes", need, got, writes)
		}
		if need <= 8<<20 && got != int(txnBytesOf(defaultMemTableSize)) {
			t.Errorf("MaxTxnBytes %d: TxnLimits %d, want the default memtable's %d", need, got, txnBytesOf(defaultMemTableSize))
		}
	}
}

// A view taken before Close holds it until released, and a view asked for
// after it is refused with an error: badger panics on a read of a closed
// database, and an agent's loops may still read while it stops.
func TestBadgerCloseWaitsForOpenViewsAndRefusesNewOnes(t *testing.T) {
	b, err := OpenBadger(t.TempDir(), BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit([][]Write{{{Key: []byte("k/1"), Val: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	r, release, err := b.View()
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	for closing := false; !closing; runtime.Gosched() { // Close has begun
		b.views.mu.Lock()
		closing = b.views.closed
		b.views.mu.Unlock()
	}
	// Close cannot finish while the view is open: it is still readable.
	n := 0
	if err := r.Scan([]byte("k/"), nil, false, func(k, v []byte) bool { n++; return true }); err != nil || n != 1 {
		t.Fatalf("scan of an open view while closing: %d keys, %v", n, err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a view was open", err)
	default:
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.View(); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("View after Close = %v, want ErrStoreClosed", err)
	}
}

// Closing a store whose directory was deleted returns (a storage error)
// instead of hanging: badger's own Close would retry its memtable flush
// into the missing directory forever.
func TestBadgerCloseWithItsDirectoryGoneReturns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	b, err := OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit([][]Write{{{Key: []byte("k"), Val: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		var se *StorageError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "directory is gone") {
			t.Fatalf("Close = %v, want a storage error naming the missing directory", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close of a store whose directory was deleted did not return")
	}
}
