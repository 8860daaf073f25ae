package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"
	"pgregory.net/rapid"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Generators for the binary commands: every field, with nil, empty and
// set values where the JSON encoding tells them apart or not.

func genStr(t *rapid.T, label string) string {
	return rapid.SampledFrom([]string{"", "a", "run-1", "ünï", "q:x.y", "0193a4b2-7c1d-7e3f-8a9b-0c1d2e3f4a5b"}).Draw(t, label)
}

func genStrs(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 2).Draw(t, label+"?") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string { return genStr(t, "s") }), 1, 4).Draw(t, label)
}

func genRaw(t *rapid.T, label string) json.RawMessage {
	return json.RawMessage(rapid.SampledFrom([]string{"", `{}`, `{"a":1,"b":[true,null,"x"]}`, `"s"`, `42`, `null`, ` { "sp" : 1 } `}).Draw(t, label))
}

func genInt64(t *rapid.T, label string) int64 {
	return rapid.SampledFrom([]int64{0, 1, -1, 127, 128, 1 << 40, -(1 << 40), 1<<63 - 1}).Draw(t, label)
}

func genTaskSpec(t *rapid.T) domain.TaskSpec {
	s := domain.TaskSpec{
		Key: genStr(t, "key"), Type: genStr(t, "type"), Queue: genStr(t, "queue"), Input: genRaw(t, "input"),
		Deps: genStrs(t, "deps"), LeaseMS: genInt64(t, "lease"), Priority: rapid.Int32().Draw(t, "prio"),
		RevertType: genStr(t, "revert"), TimeoutMS: genInt64(t, "timeout"), ScheduleToStartMS: genInt64(t, "s2s"),
		Signal: genStr(t, "signal"), ScheduleToStartPolicy: genStr(t, "s2sp"),
		When: genStr(t, "when"), Trigger: genStr(t, "trigger"), DurationMS: genInt64(t, "duration"), Until: genStr(t, "until"),
		ForEach: genStr(t, "for_each"), MaxParallel: rapid.IntRange(0, 3).Draw(t, "max_parallel"), Definition: genStr(t, "definition"),
	}
	if rapid.Bool().Draw(t, "retry?") {
		s.Retry = &domain.RetryPolicy{MaxAttempts: rapid.IntRange(0, 100).Draw(t, "max"), InitialBackoffMS: genInt64(t, "ib"),
			MaxBackoffMS: genInt64(t, "mb"), Multiplier: rapid.SampledFrom([]float64{0, 1.5, 2, 0.1}).Draw(t, "mult")}
	}
	if rapid.IntRange(0, 3).Draw(t, "inline_spec?") == 0 { // a child run's inline spec, nested once
		s.Spec = &domain.Spec{Name: genStr(t, "inline_name"), Tasks: []domain.TaskSpec{{Key: genStr(t, "inline_key"), Type: genStr(t, "inline_type"),
			Input: genRaw(t, "inline_input"), When: genStr(t, "inline_when")}}}
	}
	return s
}

func genTaskSpecs(t *rapid.T, label string) []domain.TaskSpec {
	switch rapid.IntRange(0, 2).Draw(t, label+"?") {
	case 0:
		return nil
	case 1:
		return []domain.TaskSpec{}
	}
	return rapid.SliceOfN(rapid.Custom(genTaskSpec), 1, 3).Draw(t, label)
}

func genWaiter(t *rapid.T) Waiter {
	return Waiter{WorkerID: genStr(t, "worker"), Queues: genStrs(t, "queues"), Types: genStrs(t, "types"),
		Max: rapid.IntRange(-1, 300).Draw(t, "max"), RequestID: genStr(t, "req")}
}

func genLog(t *rapid.T) *LogChunk {
	if rapid.Bool().Draw(t, "log?") {
		return nil
	}
	l := &LogChunk{Dropped: rapid.IntRange(0, 10).Draw(t, "dropped")}
	if rapid.Bool().Draw(t, "lines?") {
		l.Lines = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) LogLine {
			return LogLine{At: genInt64(t, "at"), Stream: genStr(t, "stream"), Line: genStr(t, "line")}
		}), 0, 3).Draw(t, "lines")
	}
	if rapid.Bool().Draw(t, "seq?") {
		seq := rapid.IntRange(0, 1000).Draw(t, "seq")
		l.Seq = &seq
	}
	return l
}

func genBinaryCommand(t *rapid.T) Command {
	at := genInt64(t, "at")
	switch rapid.IntRange(0, 4).Draw(t, "kind") {
	case 0:
		c := &Submit{ID: genStr(t, "id"), Input: genRaw(t, "input"), IfFull: genStr(t, "iffull"), Nonce: genStr(t, "nonce"),
			StartAt: genInt64(t, "start"), DelayMS: genInt64(t, "delay"),
			Spec: domain.Spec{Name: genStr(t, "name"), OnFailure: genStr(t, "onfail"), DeadlineMS: genInt64(t, "deadline"), Tasks: genTaskSpecs(t, "tasks")}}
		switch rapid.IntRange(0, 2).Draw(t, "labels?") {
		case 1:
			c.Labels = map[string]string{}
		case 2:
			c.Labels = rapid.MapOfN(rapid.Custom(func(t *rapid.T) string { return genStr(t, "k") }),
				rapid.Custom(func(t *rapid.T) string { return genStr(t, "v") }), 1, 5).Draw(t, "labels")
		}
		c.Stamp(at)
		return c
	case 1:
		c := &Claim{}
		switch rapid.IntRange(0, 2).Draw(t, "waiters?") {
		case 1:
			c.Waiters = []Waiter{}
		case 2:
			c.Waiters = rapid.SliceOfN(rapid.Custom(genWaiter), 1, 4).Draw(t, "waiters")
		}
		c.Stamp(at)
		return c
	case 2:
		c := &Complete{TaskID: genStr(t, "task"), Token: rapid.Uint64().Draw(t, "token"), Result: genRaw(t, "result"),
			Spawn: genTaskSpecs(t, "spawn"), Log: genLog(t)}
		if rapid.Bool().Draw(t, "claim?") {
			w := genWaiter(t)
			c.Claim = &w
		}
		c.Stamp(at)
		return c
	case 3:
		c := &Fail{TaskID: genStr(t, "task"), Token: rapid.Uint64().Draw(t, "token"), Error: genStr(t, "err"), Log: genLog(t)}
		if rapid.Bool().Draw(t, "retryable?") {
			r := rapid.Bool().Draw(t, "retryable")
			c.Retryable = &r
		}
		c.Stamp(at)
		return c
	}
	c := &Heartbeat{TaskID: genStr(t, "task"), Token: rapid.Uint64().Draw(t, "token"), Log: genLog(t)}
	c.Stamp(at)
	return c
}

// jsonEncoded is how Encode wrote c before the binary commands: the type
// byte and goccy's JSON (what the raft logs of earlier versions hold).
func jsonEncoded(t interface{ Fatal(...any) }, c Command) []byte {
	body, err := gojson.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{byte(c.Type())}, body...)
}

// compactRaw rewrites every RawMessage in v (JSON compacted them, the
// binary form keeps the bytes) so the two decodings compare equal.
func compactRaw(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			compactRaw(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				compactRaw(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			if v.Len() > 0 {
				var b bytes.Buffer
				if err := json.Compact(&b, v.Bytes()); err == nil {
					v.SetBytes(b.Bytes())
				}
			}
			return
		}
		for i := range v.Len() {
			compactRaw(v.Index(i))
		}
	}
}

// A binary command decodes to exactly what its JSON encoding decoded to
// (nil and empty slices and maps included), so every replica's state is
// what it was with JSON commands; the JSON encodings of earlier logs still
// decode; equal commands encode to equal bytes (labels in key order).
func TestBinaryCommandsDecodeAsJSONDid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genBinaryCommand(t)
		bin, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if bin[0] != byte(c.Type()) || bin[1] == '{' {
			t.Fatalf("%s encoded as %q, want the type byte and a tuple", c.Type(), bin[:2])
		}
		fromBin, err := Decode(bin)
		if err != nil {
			t.Fatalf("decode binary %s: %v", c.Type(), err)
		}
		fromJSON, err := Decode(jsonEncoded(t, c))
		if err != nil {
			t.Fatalf("decode JSON %s: %v", c.Type(), err)
		}
		compactRaw(reflect.ValueOf(fromBin))
		if !reflect.DeepEqual(fromBin, fromJSON) {
			t.Fatalf("%s decodes differently:\nbinary %#v\nJSON   %#v", c.Type(), fromBin, fromJSON)
		}
		again, _ := Encode(c)
		if !bytes.Equal(bin, again) {
			t.Fatalf("%s encodes to different bytes twice", c.Type())
		}
		// Every truncation is an error, never a panic or a partial command.
		for n := 1; n < len(bin); n++ {
			if _, err := Decode(bin[:n]); !errors.Is(err, ErrBadCommand) {
				t.Fatalf("%s cut to %d of %d bytes: err %v", c.Type(), n, len(bin), err)
			}
		}
		if _, err := Decode(append(bin, 0xc0)); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("%s with a trailing byte: err %v", c.Type(), err)
		}
	})
}

// A tuple with fields this version does not know (a newer writer's
// appended ones) decodes, the extra fields skipped; one with fewer fields
// (an older writer's) decodes with the missing ones zero.
func TestBinaryCommandsAreAppendOnly(t *testing.T) {
	c := &Complete{TaskID: "t", Token: 7, Result: json.RawMessage(`1`)}
	bin, _ := Encode(c)
	// bin[1] is the fixarray header of 7 fields; make it 8 and append a field.
	longer := append([]byte{bin[0], bin[1] + 1}, bin[2:]...)
	longer = append(longer, 0xa3, 'n', 'e', 'w')
	got, err := Decode(longer)
	if err != nil || got.(*Complete).TaskID != "t" || got.(*Complete).Token != 7 {
		t.Fatalf("with an unknown field: %#v, %v", got, err)
	}
	// The first three fields only: At, TaskID, Token.
	short := []byte{byte(MsgComplete), 0x93, 0x05, 0xa1, 't', 0x07}
	got, err = Decode(short)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Complete{Stamped: Stamped{At: 5}, TaskID: "t", Token: 7}); !reflect.DeepEqual(got, want) {
		t.Fatalf("short tuple: %#v, want %#v", got, want)
	}
}

// A length that claims more elements than bytes are left is refused before
// anything is allocated for it.
func TestBinaryCommandsRefuseImpossibleLengths(t *testing.T) {
	for name, b := range map[string][]byte{
		"tuple":   {byte(MsgClaim), 0xdd, 0xff, 0xff, 0xff, 0xff},
		"waiters": {byte(MsgClaim), 0x92, 0x01, 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x90},
		"labels":  {byte(MsgSubmit), 0x95, 0x01, 0xa1, 'x', 0x94, 0xa0, 0xa0, 0x00, 0xc0, 0xc0, 0xdf, 0x7f, 0xff, 0xff, 0xff},
		"deps":    {byte(MsgComplete), 0x95, 0x01, 0xa1, 't', 0x01, 0xc0, 0x91, 0x95, 0xa1, 'k', 0xa1, 't', 0xa0, 0xc0, 0xdd, 0x7f, 0xff, 0xff, 0xff},
	} {
		if _, err := Decode(b); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

// The spec record is a tuple now; one stored as JSON by an earlier version
// still reads.
func TestSpecRecordReadsBothEncodings(t *testing.T) {
	spec := domain.Spec{Name: "wf", Tasks: []domain.TaskSpec{{Key: "a", Type: "t", Deps: []string{"b"},
		Retry: &domain.RetryPolicy{MaxAttempts: 3}}, {Key: "b", Type: "t", Input: json.RawMessage(`{"x":1}`)}}}
	bin, _ := (*specMsg)(&spec).MarshalMsg(nil)
	js, _ := gojson.Marshal(spec)
	for name, v := range map[string][]byte{"tuple": bin, "json": js} {
		m := store.NewMemStore()
		if err := m.Commit([][]store.Write{{{Key: specKey("r1"), Val: v}}}); err != nil {
			t.Fatal(err)
		}
		r, release, err := m.View()
		if err != nil {
			t.Fatal(err)
		}
		got, err := loadSpec(r, "r1")
		release()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(*got, spec) {
			t.Fatalf("%s: %#v, want %#v", name, *got, spec)
		}
	}
}

// The encode and decode of a queue job's commands as the harness sends
// them (a one-task run with a 200-byte input; its claim; its completion),
// as JSON (earlier versions) and as tuples.
func BenchmarkJobCommandsCodec(b *testing.B) {
	input := json.RawMessage(`{"seq":123456,"pad":"` + string(bytes.Repeat([]byte("x"), 180)) + `"}`)
	cmds := []Command{
		&Submit{Stamped: Stamped{At: 1764662400000}, ID: "0193a4b2-7c1d-7e3f-8a9b-0c1d2e3f4a5b",
			Spec: domain.Spec{Name: "peerqueues", Tasks: []domain.TaskSpec{{Key: "job", Type: "peerqueues_noop", Input: input}}}},
		&Claim{Stamped: Stamped{At: 1764662400001}, Waiters: []Waiter{{WorkerID: "pq-w12", Types: []string{"peerqueues_noop"}, Max: 1}}},
		&Complete{Stamped: Stamped{At: 1764662400002}, TaskID: "0193a4b2-7c1d-7e3f-8a9b-0c1d2e3f4a5b/job", Token: 123456},
	}
	for _, enc := range []struct {
		name string
		fn   func(Command) []byte
	}{
		{"json", func(c Command) []byte { return jsonEncoded(b, c) }},
		{"tuple", func(c Command) []byte { buf, _ := Encode(c); return buf }},
	} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range cmds {
					if _, err := Decode(enc.fn(c)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
