package fsm

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
	"github.com/tinylib/msgp/msgp"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

var updateRecords = flag.Bool("update-records", false, "write testdata/records/*.msgpack for record fields that have no stored encoding yet")

// fullTask and fullRun set every field of their record (checked below), so
// a stored encoding of them exercises every position of the tuple.
func fullTask() *Task {
	return &Task{
		RunID: "run", Key: "key", Seq: 3, Type: "type", Queue: "queue",
		Input: json.RawMessage(`{"in":1}`), Deps: []string{"a", "b"}, Dependents: []string{"c"},
		Priority: 7, LeaseMS: 30000,
		Retry:      domain.RetryPolicy{MaxAttempts: 5, InitialBackoffMS: 100, MaxBackoffMS: 60000, Multiplier: 2.5},
		RevertType: "undo", SpawnedBy: "parent",
		State: domain.TaskRunning, Attempt: 2, FencingToken: 42, LeaseOwner: "w1", LeaseRequest: "req",
		LeaseExpiresAt: 1700000030000, ReadySeq: 9, ReadyAt: 1700000000001, RetryAt: 1700000000002,
		StartedAt: 1700000000003, FinishedAt: 1700000000004, Result: json.RawMessage(`{"out":true}`),
		Error: "boom", Reused: true, Indexed: true,
		Attempts: []Attempt{{N: 1, Worker: "w0", Token: 40, ClaimedAt: 1, EndedAt: 2, AckedAt: 3, Outcome: OutcomeFailed,
			Error: "e", Compensation: true, LogLines: 4, LogStored: 5, LogBytes: 6, LogChunks: 7}},
		Unacked:   1,
		Comp:      &Compensation{Phase: CompRetrying, Attempt: 1, RetryAt: 5, Error: "c", Unacked: 2},
		TimeoutMS: 1000, ScheduleToStartMS: 2000, Signal: "approve", TimeoutAt: 6, DueAt: 7, SignalID: "sig",
		ScheduleToStartPolicy: domain.ScheduleToStartAlert, Late: true,
		CreateIndex: 11, ModifyIndex: 12,
	}
}

func fullRun() *Run {
	return &Run{
		ID: "run", Workflow: "wf", OnFailure: domain.OnFailureRevert, Input: json.RawMessage(`{"in":1}`),
		Labels: Labels{"team": "a", "env": "prod"}, ParentID: "p", ReplayOf: "q", Definition: "def",
		DefinitionVersion: 2, Nonce: "n", State: domain.RunRunning, InterruptedFrom: domain.RunPending,
		Reason: "why", PausedQueues: []string{"x"}, AdmitSeq: 3,
		Counts:    domain.TaskCounts{domain.TaskReady: 2, domain.TaskSucceeded: 1},
		CreatedAt: 1, StartedAt: 2, FinishedAt: 3, StartAt: 4, DeadlineMS: 5, DeadlineAt: 6, WakeAt: 7,
		CreateIndex: 8, ModifyIndex: 9,
	}
}

// TestRecordEncodingIsAppendOnly decodes the stored encodings of fullRun
// and fullTask written when the codec was introduced (and at each later
// field addition): a field inserted between others, removed or retyped
// misreads them and fails here. A field appended at the end decodes zero
// from an older encoding; give it a value in fullRun/fullTask and run the
// test with -update-records to store an encoding that covers it too.
func TestRecordEncodingIsAppendOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		full any
		dec  func() any
	}{
		{"task", fullTask(), func() any { return &Task{} }},
		{"run", fullRun(), func() any { return &Run{} }},
		{"counters", &Counters{ActiveRuns: 1, Events: 2, TrimmedThrough: 3, NextAdmit: 4, LeaseExpiries: 5, LeaseUnacked: 6, TasksDone: 7},
			func() any { return &Counters{} }},
		{"event", &Event{Index: 1, Seq: 2, Kind: "task", RunID: "r", TaskKey: "k", Name: "n", Transition: "claim", From: "ready",
			To: "running", At: 3, Attempt: 4, Worker: "w", Queue: "q", Type: "t", Error: "e"}, func() any { return &Event{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := reflect.ValueOf(c.full).Elem()
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if f.Tag.Get("json") != "-" && v.Field(i).IsZero() && f.IsExported() {
					t.Fatalf("full%s leaves %s zero: set every field so the stored encoding covers it", c.name, f.Name)
				}
			}
			stored := filepath.Join("testdata", "records", c.name+".msgpack")
			b, err := marshal(c.full)
			if err != nil {
				t.Fatal(err)
			}
			old, err := os.ReadFile(stored)
			if os.IsNotExist(err) || *updateRecords && !bytes.Equal(old, b) {
				if !*updateRecords {
					t.Fatalf("%s missing: run with -update-records", stored)
				}
				// Keep the older encodings: they are what a node's state holds.
				n := 0
				for {
					p := filepath.Join("testdata", "records", c.name+".msgpack")
					if n > 0 {
						p = filepath.Join("testdata", "records", c.name+"."+string(rune('0'+n))+".msgpack")
					}
					if _, err := os.Stat(p); os.IsNotExist(err) {
						if err := os.WriteFile(p, b, 0o644); err != nil {
							t.Fatal(err)
						}
						break
					}
					n++
				}
			} else if err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join("testdata", "records", c.name+"*.msgpack"))
			for _, p := range files {
				enc, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				fields, _, err := msgp.ReadArrayHeaderBytes(enc)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				got := c.dec()
				if err := unmarshal(enc, got); err != nil {
					t.Fatalf("%s no longer decodes: %v (a field was inserted, removed or retyped; append new fields at the end)", p, err)
				}
				g, w := reflect.ValueOf(got).Elem(), reflect.ValueOf(c.full).Elem()
				pos := 0
				for i := range w.NumField() {
					if w.Type().Field(i).Tag.Get("json") == "-" {
						continue
					}
					if pos < int(fields) && !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
						t.Errorf("%s: field %s (position %d) reads %v, want %v: fields must be append-only", p, w.Type().Field(i).Name, pos, g.Field(i).Interface(), w.Field(i).Interface())
					}
					pos++
				}
			}
		})
	}
}

// Replicas must write identical bytes: labels and counts are encoded in
// key order, whatever Go's map order.
func TestRecordEncodingIsDeterministic(t *testing.T) {
	r := fullRun()
	r.Labels = Labels{}
	for _, k := range strings.Fields("m b x a q c z d y e p f o g n h") {
		r.Labels[k] = strings.Repeat(k, 3)
	}
	r.Counts = domain.TaskCounts{}
	for i, s := range domain.TaskStates {
		r.Counts[s] = i + 1
	}
	first, err := marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		var back Run
		if err := unmarshal(first, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := marshal(&back)
		if !bytes.Equal(first, again) {
			t.Fatal("one run encodes to different bytes")
		}
		if !reflect.DeepEqual(&back, r) {
			t.Fatalf("round trip changed the run: %+v", back)
		}
	}
}

// Records of Run and Task stored as JSON (before the MessagePack codec)
// still load, and the next change stores them in MessagePack.
func TestJSONRecordsStillLoad(t *testing.T) {
	for _, v := range []any{fullTask(), fullRun()} {
		j, err := gojson.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := unmarshal(j, got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("JSON record read as %+v", got)
		}
	}
	evs := []Event{{Index: 1, Kind: "task", Transition: "claim", At: 2}}
	j, _ := gojson.Marshal(evs)
	var back []Event
	if err := unmarshal(j, &back); err != nil || !reflect.DeepEqual(back, evs) {
		t.Fatalf("JSON events read as %+v (%v)", back, err)
	}
	if b, _ := marshal(evs); b[0] == '[' {
		t.Fatal("events are still written as JSON")
	}
	// Through Apply: a run whose records are JSON is claimed and completed.
	h := newHarness(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t"}]}`)
	r, ts := h.run("r")
	rj, _ := gojson.Marshal(r)
	tj, _ := gojson.Marshal(ts["a"])
	ctx := h.f.store.(*store.MemStore)
	if err := ctx.Commit([][]store.Write{{{Key: runKey("r"), Val: rj}, {Key: taskKey("r", "a"), Val: tj}}}); err != nil {
		t.Fatal(err)
	}
	// Loaded and left unchanged (a heartbeat with a stale token), the JSON
	// record is not rewritten: same bytes, same modify index.
	h.ok(&Heartbeat{TaskID: "r/a", Token: 99})
	_ = h.f.View(func(rd Reader) error {
		v, _, _ := rd.Get(taskKey("r", "a"))
		if !bytes.Equal(v, tj) {
			t.Fatalf("an unchanged JSON task record was rewritten: %q", v)
		}
		return nil
	})
	c := h.claimOne("w")
	if !h.complete(c, `{"ok":1}`) {
		t.Fatal("completion of a task stored as JSON refused")
	}
	if got := h.runState("r"); got != domain.RunSucceeded {
		t.Fatalf("run %s, want succeeded", got)
	}
	_ = h.f.View(func(rd Reader) error {
		v, ok, err := rd.Get(taskKey("r", "a"))
		if err != nil || !ok || v[0] == '{' {
			t.Fatalf("task record after the change: %q (%v): want MessagePack", v, err)
		}
		return nil
	})
}

// A damaged record that declares a huge array is refused before anything
// that size is allocated.
func TestRecordDecodeBoundsDeclaredLengths(t *testing.T) {
	b := msgp.AppendArrayHeader(nil, 45)
	b = msgp.AppendString(b, "run")
	b = msgp.AppendString(b, "key")
	b = msgp.AppendInt(b, 0)
	b = msgp.AppendString(b, "type")
	b = msgp.AppendString(b, "queue")
	b = msgp.AppendBytes(b, nil)
	b = msgp.AppendArrayHeader(b, 1<<31) // Deps
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var tk Task
	if err := unmarshal(b, &tk); err == nil {
		t.Fatal("a record declaring 2^31 deps decoded")
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("decoding the damaged record allocated %d bytes", grew)
	}
}

// Absent bytes decode as nil, as the JSON records' omitted members did
// (code tests input != nil).
func TestRecordNilBytesStayNil(t *testing.T) {
	b, _ := marshal(&Task{RunID: "r", Key: "k"})
	var tk Task
	if err := unmarshal(b, &tk); err != nil || tk.Input != nil || tk.Result != nil {
		t.Fatalf("task input %#v result %#v (%v), want nil", tk.Input, tk.Result, err)
	}
	b, _ = marshal(&Run{ID: "r"})
	var r Run
	if err := unmarshal(b, &r); err != nil || r.Input != nil {
		t.Fatalf("run input %#v (%v), want nil", r.Input, err)
	}
}

// flush re-stamps a changed Run or Task by replacing the encoding's last
// element (restamp) instead of encoding the record again: the bytes must
// be exactly what encoding at the new index writes, at every width of the
// two indexes (MessagePack writes an integer in 1, 2, 3, 5 or 9 bytes).
func TestRestampEqualsEncoding(t *testing.T) {
	if !runModifyLast || !taskModifyLast {
		t.Fatalf("ModifyIndex is no longer the last element of Run (%v) or Task (%v): restamp encodes twice; move the check to the new layout",
			runModifyLast, taskModifyLast)
	}
	indexes := []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<64 - 1}
	for _, old := range indexes {
		for _, now := range indexes {
			for _, v := range []interface {
				msgp.Marshaler
				modifiable
			}{fullRun(), fullTask(), &Run{}, &Task{}} {
				v.setModifyIndex(old)
				enc, err := v.MarshalMsg(nil)
				if err != nil {
					t.Fatal(err)
				}
				v.setModifyIndex(now)
				want, _ := v.MarshalMsg(nil)
				got, ok := restamp(v, enc, old, now)
				if !ok || !bytes.Equal(got, want) {
					t.Fatalf("%T %d -> %d: restamp %x (ok %v), encoding %x", v, old, now, got, ok, want)
				}
			}
		}
	}
	if _, ok := restamp(&Counters{}, []byte{0x90}, 0, 1); ok {
		t.Fatal("restamp of a record without a ModifyIndex")
	}
	if _, ok := restamp(&Run{}, []byte{0x91, 0x05}, 6, 7); ok {
		t.Fatal("restamp of an encoding that does not end with the old index")
	}
}
