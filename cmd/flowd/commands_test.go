package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// The workflows of the CLI tests written in Go (the others are scripts in
// testdata/script/cli_*.txtar).
const (
	wfETL = `name: etl
tasks:
  - key: extract
    type: echo
    input: {n: 1}
  - key: transform
    type: echo
    deps: [extract]
  - key: load
    type: echo
    deps: [transform]
`
	// b's type has no worker: the run stays running until the test acts.
	wfManual = `name: manual
tasks:
  - {key: a, type: echo}
  - {key: b, type: manual, deps: [a]}
`
)

var submittedRe = regexp.MustCompile(`run ([0-9a-f]{12}) submitted: ([0-9a-f-]{36})`)

// The events cases compare the events of one call with those of another
// (the newest two, the first from a time), which a script cannot.
func TestCLIEvents(t *testing.T) {
	tc := startCluster(t)
	tc.startWorker(t, "echo")
	sub := tc.must(t, 0, "submit", writeFile(t, "etl.yaml", wfETL), "--wait", "--timeout", "30s")
	m := submittedRe.FindStringSubmatch(sub.out)
	if m == nil {
		t.Fatalf("no run id:\n%s", sub)
	}
	short := m[1]
	r := tc.must(t, 0, "events", "--run", short)
	if !strings.Contains(r.out, "run "+short) || !strings.Contains(r.out, "task extract") || !strings.Contains(r.out, "✓ succeeded") {
		t.Fatalf("%s", r)
	}
	r = tc.must(t, 0, "events", "--run", short, "--limit", "2", "-o", "json")
	var el rpc.EventsListResult
	if err := eventLines(r.out, &el); err != nil || len(el.Events) != 2 || strings.Count(r.out, "\n") != 2 {
		t.Fatalf("events json, one object per line: %v\n%s", err, r)
	}
	// -n shows the newest events, like tail; --from the ones from there.
	var all, first rpc.EventsListResult
	if err := eventLines(tc.must(t, 0, "events", "--run", short, "-o", "json").out, &all); err != nil || len(all.Events) < 4 {
		t.Fatalf("all events: %v %+v", err, all)
	}
	last := all.Events[len(all.Events)-2:]
	if el.Events[0].Index != last[0].Index || el.Events[0].Seq != last[0].Seq || el.Events[1].Index != last[1].Index || el.Events[1].Seq != last[1].Seq {
		t.Fatalf("events -n 2 answered %+v, want the newest two %+v", el.Events, last)
	}
	r = tc.must(t, 0, "events", "--run", short, "-n", "2", "--from", "1", "-o", "json")
	if err := eventLines(r.out, &first); err != nil || len(first.Events) != 2 || first.Events[0].Index != all.Events[0].Index {
		t.Fatalf("events --from 1 -n 2: %v %+v, want the oldest two", err, first.Events)
	}
	var start rpc.EventsListResult
	r = tc.must(t, 0, "events", "--run", short, "-n", "2", "--from-start", "-o", "json")
	if err := eventLines(r.out, &start); err != nil || len(start.Events) != 2 || start.Events[0].Index != all.Events[0].Index {
		t.Fatalf("events --from-start -n 2: %v %+v, want the oldest two", err, start.Events)
	}
	// --since T starts at the first event at or after T (times are the
	// leader's stamps, never going back along the log).
	for _, k := range []int{0, 1, len(all.Events) / 2, len(all.Events) - 1} {
		at := all.Events[k].At
		want := 0
		for want < len(all.Events) && all.Events[want].At.Before(at) {
			want++
		}
		var since rpc.EventsListResult
		r = tc.must(t, 0, "events", "--run", short, "--since", at.Format(time.RFC3339Nano), "-o", "json")
		if err := eventLines(r.out, &since); err != nil || len(since.Events) != len(all.Events)-want ||
			since.Events[0].Index != all.Events[want].Index || since.Events[0].Seq != all.Events[want].Seq {
			t.Fatalf("events --since %s: %v %+v, want from event %d of %+v", at.Format(time.RFC3339Nano), err, since.Events, want, all.Events)
		}
	}
	var recent rpc.EventsListResult
	if err := eventLines(tc.must(t, 0, "events", "--run", short, "--since", "1h", "-o", "json").out, &recent); err != nil || len(recent.Events) != len(all.Events) {
		t.Fatalf("events --since 1h: %v %d events, want %d", err, len(recent.Events), len(all.Events))
	}
	if r := tc.flowd(t, "events", "--since", "1h", "--from", "3"); r.code != 2 || !strings.Contains(r.err, "one of --from, --since and --from-start") {
		t.Fatalf("--since with --from: %s", r)
	}
	if r := tc.flowd(t, "events", "--since", "yesterday"); r.code != 2 || !strings.Contains(r.err, "RFC 3339") {
		t.Fatalf("--since yesterday: %s", r)
	}
}

// eventLines reads events -o json: one event object per line.
func eventLines(out string, into *rpc.EventsListResult) error {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e rpc.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		into.Events = append(into.Events, e)
	}
	return nil
}

// run watch follows a run until it ends: the watch must have started
// before the last task completes, which the test learns from the watch's
// stderr while it runs (a script sees a command's output only once it
// ended).
func TestCLIRunWatch(t *testing.T) {
	tc := startCluster(t)
	tc.startWorker(t, "echo")
	id := tc.submitID(t, writeFile(t, "manual.yaml", strings.ReplaceAll(wfManual, "manual", "watchme")))
	s := shortID(id)
	stderr := newSignalWriter("watching run")
	stdout := newSignalWriter("")
	codec := make(chan int, 1)
	go func() {
		codec <- run(t.Context(), []string{"flowd", "--addr", tc.addr, "run", "watch", s}, nil, stdout, stderr)
	}()
	waitFor(t, stderr.found, "the watch to start", stderr)
	tc.completeOne(t, "watchme")
	code := <-codec
	out := stdout.String()
	if code != 0 || !strings.Contains(out, "task b") || !strings.Contains(out, "✓ succeeded") {
		t.Fatalf("watch exit %d\n%s\n%s", code, out, stderr.String())
	}
}
