package tui

import (
	"slices"
	"strings"
	"testing"

	"github.com/flowd/flowd/rpc"
)

// The fake's runs, newest first: 12 running, 11 succeeded, 10 failed,
// 9 pending, 8 interrupted, 7 succeeded, 6 cancelled, 5 reverted,
// 4 running, 3 succeeded, 2 running, 1 succeeded; even ones are env=prod.

func TestBulkSelectShowsMarks(t *testing.T) {
	tm, _ := startSized(t, 80, 24, nil)
	keys(tm, " ", " ", "j", " ") // marks 12 and 11, skips 10, marks 9
	waitFor(t, tm, "3 selected")
	v := requireGolden(t, tm)
	requireFits(t, v, 80, 24)
	for _, id := range []int{12, 11, 9} {
		if l := lineWith(v, shortID(runID(id))); !strings.Contains(l, "◆") {
			t.Errorf("run %d not marked: %q", id, l)
		}
	}
	if l := lineWith(v, shortID(runID(10))); strings.Contains(l, "◆") {
		t.Errorf("run 10 marked: %q", l)
	}
}

func TestBulkCancelDialog(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 45}} {
		t.Run(itoa(size[0])+"x"+itoa(size[1]), func(t *testing.T) {
			tm, f := startSized(t, size[0], size[1], nil)
			keys(tm, "a", "c") // all 12 shown; 5 can be cancelled
			waitFor(t, tm, "Cancel 5 runs?")
			v := requireGolden(t, tm)
			requireFits(t, v, size[0], size[1])
			for _, want := range []string{"and 2 more", "7 selected runs skipped", "12 selected"} {
				if !strings.Contains(v, want) {
					t.Errorf("dialog lacks %q", want)
				}
			}
			if len(f.called()) != 0 {
				t.Fatalf("the dialog alone called %v", f.called())
			}
		})
	}
}

func TestBulkCancelCalls(t *testing.T) {
	tm, f := start(t)
	keys(tm, "a", "c")
	waitFor(t, tm, "Cancel 5 runs?")
	keys(tm, "y")
	waitFor(t, tm, "cancel: 5 accepted, 0 unchanged, 0 failed")
	v := finish(t, tm)
	var want []string
	for _, i := range []int{12, 9, 8, 4, 2} { // running, pending, interrupted
		want = append(want, rpc.MethodRunCancel+" "+runID(i))
	}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v\nwant    %v", got, want)
	}
	if strings.Contains(v, "◆") || strings.Contains(v, "selected (") {
		t.Error("marks kept after the bulk action")
	}
}

func TestBulkRetryFilteredCalls(t *testing.T) {
	tm, f := start(t)
	keys(tm, "/")
	tm.Type("prod") // the even runs
	keys(tm, "enter")
	waitFor(t, tm, `filter "prod"`)
	keys(tm, "a", "R")
	waitFor(t, tm, "Retry 2 runs?", "4 selected runs skipped: not failed, cancelled or reverted")
	keys(tm, "y")
	waitFor(t, tm, "retry: 2 accepted, 0 unchanged, 0 failed")
	finish(t, tm)
	want := []string{"replay " + runID(10), "replay " + runID(6)} // failed, cancelled
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}

func TestBulkEscClearsAndOtherVerbsRefused(t *testing.T) {
	tm, f := start(t)
	keys(tm, " ", "i")
	waitFor(t, tm, "1 runs selected: c cancels them")
	keys(tm, "esc")
	waitFor(t, tm, "sort created ↓ · rows")
	v := finish(t, tm)
	if strings.Contains(v, "◆") {
		t.Error("esc did not clear the marks")
	}
	if len(f.called()) != 0 {
		t.Fatalf("calls = %v", f.called())
	}
}

func TestBulkReadOnly(t *testing.T) {
	tm, f := start(t, func(c *Config) { c.ReadOnly = true })
	keys(tm, "a", "c", "?")
	waitFor(t, tm, "Keys: Runs screen")
	v := finish(t, tm)
	if strings.Contains(v, "select all") || len(f.called()) != 0 {
		t.Errorf("read-only: help %v, calls %v", strings.Contains(v, "select all"), f.called())
	}
}

// Runs marked under one filter stay marked, and acted on, under another.
func TestBulkMarksSurviveFilterChange(t *testing.T) {
	tm, f := start(t)
	keys(tm, " ") // run 12 (running)
	keys(tm, "/")
	tm.Type("saga")
	keys(tm, "enter")
	waitFor(t, tm, `filter "saga"`)
	keys(tm, "a", "c") // saga: 9 pending, 4 running; with 12: three to cancel
	waitFor(t, tm, "Cancel 3 runs?")
	keys(tm, "y")
	waitFor(t, tm, "cancel: 3 accepted")
	finish(t, tm)
	want := []string{rpc.MethodRunCancel + " " + runID(12), rpc.MethodRunCancel + " " + runID(9), rpc.MethodRunCancel + " " + runID(4)}
	if got := f.called(); !slices.Equal(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
}
