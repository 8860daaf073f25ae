package raftnode

import (
	"testing"
	"time"

	autopilot "github.com/hashicorp/raft-autopilot"
)

// A server added to the configuration gets DeadServerAfter, from when the
// leader first sees it there, to answer the member probe before autopilot
// may judge it dead: the leader's term being older than that is not
// enough (a chaos run saw a server removed 0.3 s after it was added, while
// it was still being sent a snapshot).
func TestAutopilotGivesANewServerDeadServerAfterToAnswer(t *testing.T) {
	const dead = 30 * time.Second
	t0 := time.Now()
	d := &apDelegate{dead: dead, since: t0.Add(-time.Hour), lastSeen: map[string]time.Time{}, known: map[string]time.Time{}}
	at := func(after time.Duration) autopilot.NodeStatus { return d.statusLocked("n4", t0.Add(after)) }

	if st := at(0); st != autopilot.NodeUnknown {
		t.Fatalf("a server just added is %q, want %q", st, autopilot.NodeUnknown)
	}
	if st := at(dead - time.Second); st != autopilot.NodeUnknown {
		t.Fatalf("a server added %v ago that has not answered yet is %q, want %q", dead-time.Second, st, autopilot.NodeUnknown)
	}
	d.lastSeen["n4"] = t0.Add(dead)
	if st := at(dead); st != autopilot.NodeAlive {
		t.Fatalf("a server that answered is %q, want %q", st, autopilot.NodeAlive)
	}
	if st := at(2*dead + time.Second); st != autopilot.NodeFailed {
		t.Fatalf("a server silent for longer than %v is %q, want %q", dead, st, autopilot.NodeFailed)
	}

	// A server the leader has known since its term began, silent for longer
	// than DeadServerAfter, is failed; early in a term it is unknown.
	d2 := &apDelegate{dead: dead, since: t0, lastSeen: map[string]time.Time{}, known: map[string]time.Time{}}
	d2.statusLocked("n2", t0)
	if st := d2.statusLocked("n2", t0.Add(dead/2)); st != autopilot.NodeUnknown {
		t.Fatalf("early in a term a server not heard from is %q, want %q", st, autopilot.NodeUnknown)
	}
	if st := d2.statusLocked("n2", t0.Add(dead+time.Second)); st != autopilot.NodeFailed {
		t.Fatalf("a known server silent since the term began is %q, want %q", st, autopilot.NodeFailed)
	}
}
