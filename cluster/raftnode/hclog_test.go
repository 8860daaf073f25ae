package raftnode

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A peer that is down is logged once per peer and message as a warning,
// not several errors a second; other raft errors are untouched.
func TestDeadPeerIsLoggedOncePerPeer(t *testing.T) {
	var buf bytes.Buffer
	l := NewHCLogger(slog.New(slog.NewTextHandler(&buf, nil)), "raft")
	for range 50 {
		l.Error("failed to heartbeat to", "peer", "127.0.0.1:7002", "error", "connection refused")
	}
	l.Named("replication").Error("failed to heartbeat to", "peer", "127.0.0.1:7003", "error", "connection refused")
	l.Error("failed to take snapshot", "error", "disk")
	out := buf.String()
	if n := strings.Count(out, "failed to heartbeat to"); n != 2 {
		t.Fatalf("%d heartbeat lines for 51 failures to two peers, want 2:\n%s", n, out)
	}
	if strings.Contains(out, `level=ERROR msg="failed to heartbeat`) {
		t.Fatalf("a dead peer logged at error level:\n%s", out)
	}
	if !strings.Contains(out, `level=ERROR msg="failed to take snapshot"`) {
		t.Fatalf("another raft error was changed:\n%s", out)
	}
}

// After repeatEvery the next occurrence is logged with how many were left
// out.
func TestRepeatsCountWhatTheyLeaveOut(t *testing.T) {
	r := &repeats{last: map[string]*repeat{}}
	t0 := time.Unix(1000, 0)
	if ok, n := r.allow("k", t0); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := r.allow("k", t0.Add(time.Duration(i+1)*time.Second)); ok {
			t.Fatal("logged again within repeatEvery")
		}
	}
	if ok, n := r.allow("k", t0.Add(repeatEvery)); !ok || n != 5 {
		t.Fatalf("after repeatEvery: %v, %d left out, want 5", ok, n)
	}
}
