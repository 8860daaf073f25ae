package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

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
	wfFail = `{"name":"breaks","tasks":[{"key":"a","type":"echo"},{"key":"b","type":"fail","deps":["a"]}]}`
	// b's type has no worker: the run stays running until the test acts.
	wfManual = `name: manual
tasks:
  - {key: a, type: echo}
  - {key: b, type: manual, deps: [a]}
`
	wfSaga = `name: saga
tasks:
  - {key: a, type: sagastep, revert_type: undo}
  - {key: b, type: manual, deps: [a]}
`
	wfBad = `name: bad
tasks:
  - key: a
    type: echo
    deps: [nope]
  - key: a
    type: echo
    colour: red
`
)

var submittedRe = regexp.MustCompile(`run ([0-9a-f]{12}) submitted: ([0-9a-f-]{36})`)

// TestCLI drives every client command through the app, in process, against
// a three-node cluster.
func TestCLI(t *testing.T) {
	tc := startCluster(t)
	tc.startWorker(t, "echo", "fail", "undo")
	etl := writeFile(t, "etl.yaml", wfETL)

	var runID, short string
	t.Run("submit --wait with flags after the file", func(t *testing.T) {
		r := tc.must(t, 0, "submit", etl, "--wait", "--label", "team=data", "--input", `{"x":1}`, "--timeout", "30s")
		m := submittedRe.FindStringSubmatch(r.out)
		if m == nil || !strings.HasSuffix(m[2], m[1]) {
			t.Fatalf("no run id:\n%s", r)
		}
		short, runID = m[1], m[2]
		if !strings.Contains(r.out, "✓ succeeded") || !strings.Contains(r.out, "(3/3 tasks done)") {
			t.Fatalf("no success line:\n%s", r)
		}
		if !strings.Contains(r.err, "tasks 3/3") {
			t.Fatalf("no progress on stderr:\n%s", r)
		}
	})

	t.Run("submit with the same id is idempotent", func(t *testing.T) {
		r := tc.must(t, 0, "submit", "--id", runID, etl, "-o", "json")
		var v submitResultView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || v.ID != runID || v.Created {
			t.Fatalf("resubmit: %v\n%s", err, r)
		}
	})

	t.Run("submit from stdin", func(t *testing.T) {
		r := tc.flowdIn(t, strings.NewReader(wfETL), "submit", "-", "--wait")
		if r.code != 0 || !strings.Contains(r.out, "✓ succeeded") {
			t.Fatalf("%s", r)
		}
	})

	t.Run("run list", func(t *testing.T) {
		r := tc.must(t, 0, "run", "list")
		if !strings.Contains(r.out, short) || !strings.Contains(r.out, "✓ succeeded") || !strings.Contains(r.out, "WORKFLOW") {
			t.Fatalf("%s", r)
		}
		if !strings.Contains(r.out, "LABELS") || !strings.Contains(r.out, "team=data") {
			t.Fatalf("no labels column:\n%s", r)
		}
		// Filtered on the agent: by label, by workflow, by age.
		var fl rpc.ListResult
		r = tc.must(t, 0, "run", "list", "--label", "team=data", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &fl); err != nil || len(fl.Runs) == 0 {
			t.Fatalf("--label team=data: %v\n%s", err, r)
		}
		for _, x := range fl.Runs {
			if x.Labels["team"] != "data" {
				t.Fatalf("--label team=data listed %s with %v", x.ID, x.Labels)
			}
		}
		r = tc.must(t, 0, "run", "list", "--label", "team=nobody", "--workflow", "etl", "--since", "1h")
		if !strings.Contains(r.out, "no runs") {
			t.Fatalf("--label team=nobody:\n%s", r)
		}
		// A label selector: != and k terms, on the agent.
		var sl rpc.ListResult
		r = tc.must(t, 0, "run", "list", "--selector", "team!=data", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &sl); err != nil || len(sl.Runs) == 0 {
			t.Fatalf("--selector team!=data: %v\n%s", err, r)
		}
		for _, x := range sl.Runs {
			if x.Labels["team"] == "data" {
				t.Fatalf("--selector team!=data listed %s with %v", x.ID, x.Labels)
			}
		}
		r = tc.must(t, 0, "run", "list", "-s", "team,!nosuch")
		if !strings.Contains(r.out, short) || !strings.Contains(r.out, "team=data") {
			t.Fatalf("-s team,!nosuch:\n%s", r)
		}
		r = tc.must(t, 0, "run", "list", "-s", "team!=data", "--label", "team=data")
		if !strings.Contains(r.out, "no runs") {
			t.Fatalf("--selector team!=data --label team=data:\n%s", r)
		}
		r = tc.must(t, 2, "run", "list", "--selector", "team!=data,=x")
		if !strings.Contains(r.err, `--selector: selector term 2 "=x": empty key`) {
			t.Fatalf("bad selector:\n%s", r)
		}
		r = tc.must(t, 0, "run", "list", "--state", "succeeded", "-o", "json")
		var lr rpc.ListResult
		if err := json.Unmarshal([]byte(r.out), &lr); err != nil || len(lr.Runs) < 2 || lr.Counts["succeeded"] < 2 {
			t.Fatalf("list json: %v\n%s", err, r)
		}
		// One per page, then every page.
		r = tc.must(t, 0, "run", "list", "--limit", "1")
		if !strings.Contains(r.err, "more runs") {
			t.Fatalf("no next-page hint:\n%s", r)
		}
		r = tc.must(t, 0, "run", "list", "--limit", "1", "--all", "-o", "json")
		var all rpc.ListResult
		if err := json.Unmarshal([]byte(r.out), &all); err != nil || len(all.Runs) != len(lr.Runs) || all.NextCursor != "" {
			t.Fatalf("--all: %v (%d runs, want %d)\n%s", err, len(all.Runs), len(lr.Runs), r)
		}
		tc.must(t, 2, "run", "list", "--state", "bogus")
	})

	t.Run("def put, list, get; submit --definition", func(t *testing.T) {
		v1 := writeFile(t, "nightly-v1.yaml", "name: nightly\ntasks:\n  - {key: a, type: echo}\n")
		v2 := writeFile(t, "nightly-v2.yaml", "name: nightly\ntasks:\n  - {key: a, type: echo}\n  - {key: b, type: echo, deps: [a]}\n")
		if r := tc.must(t, 0, "def", "put", v1); !strings.Contains(r.out, "definition nightly@1 stored") {
			t.Fatalf("put v1:\n%s", r)
		}
		if r := tc.must(t, 0, "def", "put", v1); !strings.Contains(r.out, "unchanged: definition nightly@1") {
			t.Fatalf("put v1 again:\n%s", r)
		}
		if r := tc.must(t, 1, "def", "put", v2, "--version", "1"); !strings.Contains(r.err, "put it without a version") {
			t.Fatalf("changing version 1:\n%s", r)
		}
		tc.must(t, 0, "def", "put", v2, "--note", "adds b")
		if r := tc.must(t, 0, "def", "list"); !strings.Contains(r.out, "nightly") || !strings.Contains(r.out, "adds b") {
			t.Fatalf("list:\n%s", r)
		}
		if r := tc.must(t, 0, "def", "get", "nightly@1", "--versions"); !strings.Contains(r.out, "nightly@1") || !strings.Contains(r.out, `"key": "a"`) ||
			strings.Contains(r.out, `"key": "b"`) || !strings.Contains(r.out, "adds b") {
			t.Fatalf("get nightly@1:\n%s", r)
		}
		// By name: the latest version runs (two tasks).
		r := tc.must(t, 0, "submit", "--definition", "nightly", "--wait", "--timeout", "30s")
		m := submittedRe.FindStringSubmatch(r.out)
		if m == nil || !strings.Contains(r.out, "2/2") {
			t.Fatalf("submit --definition:\n%s", r)
		}
		if r := tc.must(t, 0, "run", "get", m[1]); !strings.Contains(r.out, "nightly@2") {
			t.Fatalf("run get shows no definition:\n%s", r)
		}
		tc.must(t, 0, "submit", "--definition", "nightly@1", "--wait", "--timeout", "30s")
		var fl rpc.ListResult
		r = tc.must(t, 0, "run", "list", "--definition", "nightly@2", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &fl); err != nil || len(fl.Runs) != 1 || fl.Runs[0].ID != m[2] {
			t.Fatalf("run list --definition nightly@2: %v\n%s", err, r)
		}
		tc.must(t, 2, "submit", "--definition", "nightly", v1)
		if r := tc.must(t, 1, "submit", "--definition", "nope"); !strings.Contains(r.err, "flowd def put") {
			t.Fatalf("unknown definition:\n%s", r)
		}
	})

	t.Run("run list --schedule", func(t *testing.T) {
		tc.must(t, 0, "schedule", "create", "cli-hourly", etl, "--every", "1h", "--paused")
		r := tc.must(t, 0, "schedule", "trigger", "cli-hourly")
		m := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(r.out)
		if m == "" {
			t.Fatalf("no run id in:\n%s", r)
		}
		var fl rpc.ListResult
		r = tc.must(t, 0, "run", "list", "--schedule", "cli-hourly", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &fl); err != nil || len(fl.Runs) != 1 || fl.Runs[0].ID != m ||
			fl.Runs[0].Labels["flowd.schedule"] != "cli-hourly" {
			t.Fatalf("--schedule cli-hourly: %v, want only run %s\n%s", err, m, r)
		}
		r = tc.must(t, 0, "run", "list", "--schedule", "nope")
		if !strings.Contains(r.out, "no runs") {
			t.Fatalf("--schedule nope:\n%s", r)
		}
		tc.must(t, 2, "run", "list", "--schedule", "cli-hourly", "--label", "flowd.schedule=other")
		tc.must(t, 0, "schedule", "delete", "cli-hourly")
	})

	t.Run("run get", func(t *testing.T) {
		r := tc.must(t, 0, "run", "get", short)
		for _, want := range []string{runID, "✓ succeeded", "team=data", "extract", "transform", "load", "3/3 done"} {
			if !strings.Contains(r.out, want) {
				t.Fatalf("missing %q:\n%s", want, r)
			}
		}
		run := getRun(t, tc, short[4:]) // any unique part of the id
		if run.ID != runID || run.State != "succeeded" || len(run.Tasks) != 3 || run.Labels["team"] != "data" {
			t.Fatalf("run %+v", run)
		}
	})

	t.Run("task get", func(t *testing.T) {
		r := tc.must(t, 0, "task", "get", short+"/extract")
		for _, want := range []string{"test-worker", "✓ succeeded", "WORKER", "TOKEN", "Lease:", "Compensation:"} {
			if !strings.Contains(r.out, want) {
				t.Fatalf("missing %q:\n%s", want, r)
			}
		}
		r = tc.must(t, 0, "task", "get", short+"/load", "-o", "json")
		var task rpc.Task
		if err := json.Unmarshal([]byte(r.out), &task); err != nil || len(task.Attempts) != 1 || task.Attempts[0].Worker != "test-worker" ||
			len(task.Deps) != 1 || task.Deps[0] != "transform" {
			t.Fatalf("task json: %v\n%s", err, r)
		}
		tc.must(t, 2, "task", "get", "no-slash")
		r = tc.must(t, 1, "task", "get", short+"/nosuchkey")
		if !strings.Contains(r.err, "hint:") {
			t.Fatalf("no hint:\n%s", r)
		}
	})

	t.Run("run stats", func(t *testing.T) {
		r := tc.must(t, 0, "run", "stats", short)
		if !strings.Contains(r.out, "Attempts:") || !strings.Contains(r.out, "QUEUE WAIT") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 0, "run", "stats", short, "-o", "json")
		var st rpc.RunStats
		if err := json.Unmarshal([]byte(r.out), &st); err != nil || st.Attempts != 3 || len(st.Tasks) != 3 {
			t.Fatalf("stats json: %v\n%s", err, r)
		}
	})

	t.Run("events", func(t *testing.T) {
		r := tc.must(t, 0, "events", "--run", short)
		if !strings.Contains(r.out, "run "+short) || !strings.Contains(r.out, "task extract") || !strings.Contains(r.out, "✓ succeeded") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 0, "events", "--run", short, "--limit", "2", "-o", "json")
		var el rpc.EventsListResult
		if err := json.Unmarshal([]byte(r.out), &el); err != nil || len(el.Events) != 2 {
			t.Fatalf("events json: %v\n%s", err, r)
		}
		// -n shows the newest events, like tail; --from the ones from there.
		var all, first rpc.EventsListResult
		if err := json.Unmarshal([]byte(tc.must(t, 0, "events", "--run", short, "-o", "json").out), &all); err != nil || len(all.Events) < 4 {
			t.Fatalf("all events: %v %+v", err, all)
		}
		last := all.Events[len(all.Events)-2:]
		if el.Events[0].Index != last[0].Index || el.Events[0].Seq != last[0].Seq || el.Events[1].Index != last[1].Index || el.Events[1].Seq != last[1].Seq {
			t.Fatalf("events -n 2 answered %+v, want the newest two %+v", el.Events, last)
		}
		r = tc.must(t, 0, "events", "--run", short, "-n", "2", "--from", "1", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &first); err != nil || len(first.Events) != 2 || first.Events[0].Index != all.Events[0].Index {
			t.Fatalf("events --from 1 -n 2: %v %+v, want the oldest two", err, first.Events)
		}
		var start rpc.EventsListResult
		r = tc.must(t, 0, "events", "--run", short, "-n", "2", "--from-start", "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &start); err != nil || len(start.Events) != 2 || start.Events[0].Index != all.Events[0].Index {
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
			if err := json.Unmarshal([]byte(r.out), &since); err != nil || len(since.Events) != len(all.Events)-want ||
				since.Events[0].Index != all.Events[want].Index || since.Events[0].Seq != all.Events[want].Seq {
				t.Fatalf("events --since %s: %v %+v, want from event %d of %+v", at.Format(time.RFC3339Nano), err, since.Events, want, all.Events)
			}
		}
		var recent rpc.EventsListResult
		if err := json.Unmarshal([]byte(tc.must(t, 0, "events", "--run", short, "--since", "1h", "-o", "json").out), &recent); err != nil || len(recent.Events) != len(all.Events) {
			t.Fatalf("events --since 1h: %v %d events, want %d", err, len(recent.Events), len(all.Events))
		}
		if r := tc.flowd(t, "events", "--since", "1h", "--from", "3"); r.code != 2 || !strings.Contains(r.err, "one of --from, --since and --from-start") {
			t.Fatalf("--since with --from: %s", r)
		}
		if r := tc.flowd(t, "events", "--since", "yesterday"); r.code != 2 || !strings.Contains(r.err, "RFC 3339") {
			t.Fatalf("--since yesterday: %s", r)
		}
	})

	t.Run("run replay", func(t *testing.T) {
		r := tc.must(t, 0, "run", "replay", short, "--reuse-succeeded", "--wait")
		m := regexp.MustCompile(`run ([0-9a-f]{12}) replays ` + short).FindStringSubmatch(r.out)
		if m == nil || !strings.Contains(r.out, "✓ succeeded") {
			t.Fatalf("%s", r)
		}
		child := getRun(t, tc, m[1])
		if child.ParentID != runID || child.ID == runID {
			t.Fatalf("child %+v", child)
		}
	})

	t.Run("a failed run exits 3", func(t *testing.T) {
		r := tc.must(t, 3, "submit", writeFile(t, "fail.json", wfFail), "--wait")
		if !strings.Contains(r.out, "✗ failed") || !strings.Contains(r.out, "boom: b") {
			t.Fatalf("%s", r)
		}
	})

	t.Run("interrupt, resume, cancel", func(t *testing.T) {
		id := tc.submitID(t, writeFile(t, "manual.yaml", wfManual))
		s := shortID(id)
		r := tc.must(t, 0, "run", "interrupt", s)
		if !strings.Contains(r.out, "‖ interrupted") {
			t.Fatalf("%s", r)
		}
		// Agents check a verb against their own state (see the report on
		// daemon verbs): let every one catch up before the next verb.
		tc.sync(t)
		if run := getRun(t, tc, s); run.State != "interrupted" {
			t.Fatalf("state %s", run.State)
		}
		r = tc.must(t, 0, "run", "interrupt", s)
		if !strings.Contains(r.out, "unchanged") {
			t.Fatalf("%s", r)
		}
		tc.sync(t)
		r = tc.must(t, 0, "run", "resume", s, "-o", "json")
		var v struct {
			Changed bool   `json:"changed"`
			State   string `json:"state"`
		}
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || !v.Changed || v.State != "running" {
			t.Fatalf("resume: %v\n%s", err, r)
		}
		tc.sync(t)
		r = tc.must(t, 0, "run", "cancel", s, "--reason", "test")
		if !strings.Contains(r.out, "⊘ cancelled") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 3, "run", "wait", s)
		if !strings.Contains(r.out, "⊘ cancelled") {
			t.Fatalf("%s", r)
		}
		tc.sync(t)
		// Resuming a cancelled run is an illegal transition: exit 1 with a hint.
		r = tc.must(t, 1, "run", "resume", s)
		if !strings.Contains(r.err, "illegal_transition") || !strings.Contains(r.err, "hint:") {
			t.Fatalf("%s", r)
		}
	})

	t.Run("wait timeout exits 4", func(t *testing.T) {
		manual := writeFile(t, "manual.yaml", wfManual)
		r := tc.must(t, 4, "submit", manual, "--wait", "--timeout", "300ms")
		if !strings.Contains(r.err, "timed out") {
			t.Fatalf("%s", r)
		}
		m := submittedRe.FindStringSubmatch(r.out)
		if m == nil {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 4, "run", "wait", m[1], "--timeout", "200ms")
		if !strings.Contains(r.err, "still") || !strings.Contains(r.err, "flowd run wait") {
			t.Fatalf("%s", r)
		}
		tc.must(t, 0, "run", "cancel", m[1])
	})

	t.Run("revert runs compensations", func(t *testing.T) {
		id := tc.submitID(t, writeFile(t, "saga.yaml", wfSaga))
		s := shortID(id)
		tc.completeOne(t, "sagastep") // a succeeded; b waits for a "manual" worker
		r := tc.must(t, 0, "run", "revert", s)
		if !strings.Contains(r.out, "reverting") && !strings.Contains(r.out, "reverted") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 3, "run", "wait", s, "--timeout", "30s")
		if !strings.Contains(r.out, "⟲ reverted") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 0, "task", "get", s+"/a")
		if !strings.Contains(r.out, "revert handler undo") || !strings.Contains(r.out, "(revert)") {
			t.Fatalf("no compensation shown:\n%s", r)
		}
	})

	t.Run("run watch", func(t *testing.T) {
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
	})

	t.Run("queue delete", func(t *testing.T) {
		// A name no task uses is refused as a typo unless --create says so.
		if r := tc.must(t, 2, "queue", "set", "tpyo", "--concurrency", "1"); !strings.Contains(r.err, `no task uses queue "tpyo"`) || !strings.Contains(r.err, "--create") {
			t.Fatalf("queue set of an unused name:\n%s", r)
		}
		if r := tc.must(t, 2, "queue", "pause", "tpyo"); !strings.Contains(r.err, "--create") {
			t.Fatalf("queue pause of an unused name:\n%s", r)
		}
		tc.must(t, 0, "queue", "set", "tpyo", "--concurrency", "1", "--create")
		if r := tc.must(t, 0, "queue", "delete", "tpyo"); !strings.Contains(r.out, "queue tpyo deleted") {
			t.Fatalf("%s", r)
		}
		if r := tc.must(t, 1, "queue", "delete", "tpyo"); !strings.Contains(r.err, "no queue") || !strings.Contains(r.err, "flowd queue list") {
			t.Fatalf("deleting it again:\n%s", r)
		}
	})

	t.Run("queue auto", func(t *testing.T) {
		r := tc.must(t, 0, "queue", "set", "thumbs", "--create", "--concurrency", "auto", "--min", "1", "--max", "6", "--target-latency", "250ms")
		if !strings.Contains(r.out, "concurrency set to auto between 1 and 6 (target latency 250ms)") {
			t.Fatalf("%s", r)
		}
		if r := tc.must(t, 2, "queue", "set", "thumbs", "--concurrency", "auto", "--max", "6"); !strings.Contains(r.err, "--min") {
			t.Fatalf("auto without --min:\n%s", r)
		}
		if r := tc.must(t, 2, "queue", "set", "thumbs", "--concurrency", "3", "--max", "6"); !strings.Contains(r.err, "--concurrency auto") {
			t.Fatalf("--max with a number:\n%s", r)
		}
		tc.sync(t)
		r = tc.must(t, 0, "queue", "list")
		if !strings.Contains(r.out, "auto 6 (1-6 <250ms)") {
			t.Fatalf("queue list lacks the auto cap:\n%s", r)
		}
		r = tc.must(t, 0, "queue", "set", "thumbs", "--concurrency", "0")
		tc.sync(t)
		if r = tc.must(t, 0, "queue", "list", "-o", "json"); strings.Contains(r.out, `"auto"`) {
			t.Fatalf("a number did not turn auto off:\n%s", r)
		}
		tc.must(t, 0, "queue", "delete", "thumbs")
	})

	t.Run("queue", func(t *testing.T) {
		r := tc.must(t, 0, "queue", "set", "default", "--concurrency", "2")
		if !strings.Contains(r.out, "concurrency set to 2") {
			t.Fatalf("%s", r)
		}
		tc.sync(t)
		r = tc.must(t, 0, "queue", "list", "-o", "json")
		var ql rpc.QueueListResult
		if err := json.Unmarshal([]byte(r.out), &ql); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		found := false
		for _, q := range ql.Queues {
			if q.Name == "default" {
				found = q.Concurrency == 2
			}
		}
		if !found {
			t.Fatalf("default queue not capped:\n%s", r)
		}
		r = tc.must(t, 0, "queue", "list")
		if !strings.Contains(r.out, "CONCURRENCY") || !strings.Contains(r.out, "default") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 0, "queue", "pause", "default")
		if !strings.Contains(r.out, "queue default paused") {
			t.Fatalf("%s", r)
		}
		tc.sync(t)
		r = tc.must(t, 0, "queue", "list")
		if !strings.Contains(r.out, "‖ yes") {
			t.Fatalf("%s", r)
		}
		tc.must(t, 0, "queue", "resume", "default")
		r = tc.must(t, 0, "queue", "pause", "default", "--run", short)
		if !strings.Contains(r.out, "for run") {
			t.Fatalf("%s", r)
		}
		tc.must(t, 0, "queue", "resume", "default", "--run", short)
		tc.must(t, 0, "queue", "set", "default", "--concurrency", "0")
		tc.must(t, 2, "queue", "set", "default")
	})

	t.Run("settings", func(t *testing.T) {
		r := tc.must(t, 0, "settings", "set", "--max-running-runs", "50", "--retention", "48h", "--breaker-cooldown", "10s")
		if !strings.Contains(r.out, "max_running_runs") || !strings.Contains(r.out, "50") {
			t.Fatalf("%s", r)
		}
		tc.sync(t)
		r = tc.must(t, 0, "settings", "get", "-o", "json")
		var s rpc.Settings
		if err := json.Unmarshal([]byte(r.out), &s); err != nil || s.MaxRunningRuns == nil || *s.MaxRunningRuns != 50 ||
			s.RetentionMS == nil || *s.RetentionMS != 48*3600*1000 || *s.BreakerCooldownMS != 10_000 {
			t.Fatalf("settings: %v\n%s", err, r)
		}
		tc.must(t, 0, "settings", "set", "--max-running-runs", "0")
		tc.must(t, 2, "settings", "set")
	})

	t.Run("invalid spec lists every problem", func(t *testing.T) {
		r := tc.must(t, 1, "submit", writeFile(t, "bad.yaml", wfBad))
		for _, want := range []string{"tasks[0].deps[0]:", "(unknown_dependency)", "tasks[1].key:", "(duplicate_key)", "tasks[1].colour:", "(unknown_field)"} {
			if !strings.Contains(r.err, want) {
				t.Fatalf("missing %q:\n%s", want, r)
			}
		}
	})

	t.Run("not found has a hint", func(t *testing.T) {
		r := tc.must(t, 1, "run", "get", "ffffffffffff")
		if !strings.Contains(r.err, "error: ") || !strings.Contains(r.err, "flowd run list") {
			t.Fatalf("%s", r)
		}
	})

	t.Run("rpc", func(t *testing.T) {
		r := tc.must(t, 0, "rpc", "cluster.status")
		var st rpc.ClusterStatus
		if err := json.Unmarshal([]byte(r.out), &st); err != nil || st.NodeID == "" || st.LeaderID == "" {
			t.Fatalf("%v\n%s", err, r)
		}
		r = tc.must(t, 0, "rpc", "run.get", `{"id":"`+short+`"}`)
		if !strings.Contains(r.out, `"id": "`+runID+`"`) {
			t.Fatalf("%s", r)
		}
		r = tc.flowdIn(t, strings.NewReader(`{"id":"`+short+`"}`), "rpc", "run.stats", "-")
		if r.code != 0 || !strings.Contains(r.out, `"attempts": 3`) {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 1, "rpc", "no.such")
		var e rpc.Error
		if err := json.Unmarshal([]byte(r.out), &e); err != nil || e.Code != rpc.CodeMethodNotFound {
			t.Fatalf("%v\n%s", err, r)
		}
		r = tc.must(t, 1, "rpc", "run.get", `{"id":"ffffffffffff"}`)
		if !strings.Contains(r.out, "-32001") {
			t.Fatalf("%s", r)
		}
		tc.must(t, 2, "rpc", "run.get", "{not json")
	})

	t.Run("health", func(t *testing.T) {
		r := tc.must(t, 0, "health")
		if !strings.Contains(r.out, "healthy: leader") || strings.Count(r.out, "✓") != 3 {
			t.Fatalf("%s", r)
		}
		var out, errb strings.Builder
		code := run(t.Context(), []string{"flowd", "--addr", tc.addr + ",unix://" + filepath.Join(tc.dir, "gone.sock"), "health", "-o", "json"}, nil, &out, &errb)
		var rep healthReport
		// A leader and a quorum, but an endpoint of --addr does not answer:
		// degraded, exit 5.
		if err := json.Unmarshal([]byte(out.String()), &rep); code != exitDegraded || err != nil || !rep.Healthy || rep.Verdict != verdictDegraded || len(rep.Nodes) != 4 || rep.Nodes[3].Reachable {
			t.Fatalf("exit %d %v\n%s\n%s", code, err, out.String(), errb.String())
		}
	})

	t.Run("operator raft", func(t *testing.T) {
		r := tc.must(t, 0, "operator", "raft", "list-peers")
		if strings.Count(r.out, "voter") != 3 || strings.Count(r.out, "leader") != 1 {
			t.Fatalf("%s", r)
		}
		tc.must(t, 0, "operator", "raft", "list-peers", "-o", "json")
		tc.must(t, 2, "operator", "raft", "add-peer", "n4")
	})

	t.Run("version", func(t *testing.T) {
		r := tc.must(t, 0, "version", "-o", "json")
		var v map[string]string
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || v["version"] != version || v["commit"] != commit {
			t.Fatalf("%v\n%s", err, r)
		}
	})

	t.Run("snapshot save, inspect, restore", func(t *testing.T) {
		// Paths are refused: a snapshot is a file name in --snapshot-dir.
		r := tc.must(t, 1, "snapshot", "save", filepath.Join(t.TempDir(), "state.snap"))
		if !strings.Contains(r.err, "only inside --snapshot-dir") {
			t.Fatalf("%s", r)
		}
		r = tc.must(t, 0, "snapshot", "save", "state.snap", "-o", "json")
		var saved rpc.SnapshotResult
		if err := json.Unmarshal([]byte(r.out), &saved); err != nil || filepath.Base(saved.Path) != "state.snap" {
			t.Fatalf("%v\n%s", err, r)
		}
		file := saved.Path
		// The leader reads it from its own --snapshot-dir: put a copy in
		// every agent's, as an operator would copy it to the leader.
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.agents {
			dst := filepath.Join(tc.dir, fmt.Sprintf("n%d", i+1), "snapshots", "state.snap")
			if dst == file {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r = tc.must(t, 0, "snapshot", "inspect", file, "-o", "json")
		var sum snapshotSummary
		if err := json.Unmarshal([]byte(r.out), &sum); err != nil || sum.AppliedIndex == 0 || sum.Runs["succeeded"] < 3 {
			t.Fatalf("%v\n%s", err, r)
		}
		r = tc.must(t, 0, "snapshot", "inspect", file)
		if !strings.Contains(r.out, "Applied index:") || !strings.Contains(r.out, "✓ succeeded") {
			t.Fatalf("%s", r)
		}
		// A run submitted after the snapshot is gone once it is restored.
		later := tc.submitID(t, writeFile(t, "manual.yaml", wfManual))
		r = tc.must(t, 0, "snapshot", "restore", "state.snap")
		if !strings.Contains(r.out, "restored") {
			t.Fatalf("%s", r)
		}
		ctx, cancel := context.WithTimeout(t.Context(), callTimeoutForTests)
		defer cancel()
		var run rpc.Run
		err = tc.client(t).CallIdempotent(ctx, rpc.MethodRunGet, rpc.IDParams{ID: later, Consistent: true}, &run)
		if err == nil {
			t.Fatalf("run %s submitted after the snapshot survived the restore (state %s)", later, run.State)
		}
		getRun(t, tc, short)
	})
}
