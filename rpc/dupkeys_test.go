package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDuplicateMember(t *testing.T) {
	cases := []struct {
		in      string
		fold    bool
		want    string // "" = none
		tooDeep bool
	}{
		{in: `{"id":"a","name":"b"}`},
		{in: `{"id":"a","id":"b"}`, want: "id"},
		{in: `{"id":"a","\u0069d":"b"}`, want: "id"},
		{in: `{"id":"a","ID":"b"}`, fold: true, want: "ID"},
		{in: `{"id":"a","ID":"b"}`}, // nested maps are case-sensitive
		{in: `{"a":{"x":1,"y":{"z":[{"k":1,"k":2}]}}}`, want: "k"},
		{in: `{"a":{"x":1},"b":{"x":1}}`},             // same name in two objects
		{in: `{"a":{"Env":1,"env":2}}`, fold: true},   // only the top level folds
		{in: `{"s":"{\"id\":1,\"id\":2}","t":"\"}"}`}, // braces inside strings
		{in: `{"é":1,"\u00e9":2}`, want: "é"},         // escaped vs raw UTF-8
		{in: `{"😀":1,"\ud83d\ude00":2}`, want: "😀"},   // surrogate pair
		{in: `[{"a":1},{"a":1}]`},
		{in: `{"a":1,"b":2,"a":3}`, want: "a"},
		{in: ` { "a" : 1 , "a" : 2 } `, want: "a"},
		{in: `{"a":`}, // not JSON: left to the decoder
		{in: strings.Repeat("[", dupMaxDepth+1) + strings.Repeat("]", dupMaxDepth+1), tooDeep: true},
	}
	for _, c := range cases {
		name, ok, deep := duplicateMember([]byte(c.in), c.fold)
		if deep != c.tooDeep || ok != (c.want != "") || name != c.want {
			t.Errorf("duplicateMember(%s, fold=%v) = %q, %v, %v; want %q, deep %v", c.in, c.fold, name, ok, deep, c.want, c.tooDeep)
		}
	}
}

func TestDuplicateMemberManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	if name, ok, _ := duplicateMember([]byte(b.String()+`}`), false); ok {
		t.Fatalf("100 distinct keys: duplicate %q reported", name)
	}
	if name, ok, _ := duplicateMember([]byte(b.String()+`,"kxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx":2}`), false); !ok || !strings.HasPrefix(name, "kxxx") {
		t.Fatalf("a duplicate past the inline names: got %q, %v", name, ok)
	}
}

func TestFuncRejectsDuplicateMembers(t *testing.T) {
	type P struct {
		ID     string            `json:"id"`
		Labels map[string]string `json:"labels"`
	}
	h := Func(func(_ context.Context, p P) (string, error) { return p.ID, nil })
	for _, raw := range []string{`{"id":"a","id":"b"}`, `{"id":"a","Id":"b"}`, `{"id":"a","labels":{"x":"1","x":"2"}}`} {
		_, err := h(context.Background(), json.RawMessage(raw))
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "appears twice") {
			t.Errorf("%s: got %v, want -32602 naming the member", raw, err)
		}
	}
	if v, err := h(context.Background(), json.RawMessage(`{"id":"a","labels":{"x":"1","X":"2"}}`)); err != nil || v != "a" {
		t.Errorf("distinct label keys: %v, %v", v, err)
	}
}

// A typical submit's params: what every call pays.
var benchParams = []byte(`{"workflow":{"name":"job","tasks":[{"key":"a","type":"echo","queue":"default","retry":{"max_attempts":3}}]},"id":"0190f7a4-7c2e-7b4a-9c1d-3f2a1b0c9d8e","input":{"payload":"` + strings.Repeat("x", 200) + `"},"labels":{"team":"a","env":"prod"}}`)

func BenchmarkDuplicateMember(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchParams)))
	for b.Loop() {
		if _, ok, _ := duplicateMember(benchParams, true); ok {
			b.Fatal("duplicate")
		}
	}
}
