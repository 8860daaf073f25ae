package main

import (
	"context"
	"strings"
	"testing"
)

// TestEventsFollowSurvivesAgentLoss: `events --follow` streams from the
// first agent of --addr; when that agent stops, the stream resumes on
// another one from the last index it received, losing and repeating
// nothing.
func TestEventsFollowSurvivesAgentLoss(t *testing.T) {
	tc := startCluster(t)
	tc.startWorker(t, "echo")
	id := tc.submitID(t, writeFile(t, "manual.yaml", strings.ReplaceAll(wfManual, "manual", "follow")))
	s := shortID(id)

	stdout := newSignalWriter("task a")
	stderr := newSignalWriter("")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	codec := make(chan int, 1)
	go func() {
		codec <- run(ctx, []string{"flowd", "--addr", tc.addr, "events", "--follow", "--run", s, "--from", "1"}, nil, stdout, stderr)
	}()
	// Task a succeeds through the test worker: wait until its completion
	// has been streamed.
	waitFor(t, stdout.expectLine("task a", "✓ succeeded"), "task a's success", stdout)

	// The client talks to the first endpoint; stop that agent.
	tc.stops[0]()

	// Complete b through the remaining agents; the stream must follow.
	tc.completeOne(t, "follow")
	waitFor(t, stdout.expectLine("task b", "✓ succeeded"), "task b's success after the failover", stdout)
	waitFor(t, stdout.expectLine("run "+s, "✓ succeeded"), "the run's success", stdout)
	cancel()
	if code := <-codec; code != 0 {
		t.Fatalf("events --follow exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if seen[line] {
			t.Fatalf("event repeated after the failover: %q\n%s", line, stdout.String())
		}
		seen[line] = true
	}
	for _, want := range []string{"task b", "claim", "succeed"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("missing %q after the failover:\n%s", want, stdout.String())
		}
	}
}
