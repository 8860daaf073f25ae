package domain

import (
	"reflect"
	"testing"
)

var fastSpecSeeds = []string{
	`{"tasks":[{"key":"a","type":"t"}]}`,
	`{"name":"etl","on_failure":"revert","deadline_ms":5000,"tasks":[{"key":"a","type":"t","input":{"x":[1,2,{"y":"z"}],"s":"a\"b"},"retry":{"max_attempts":3,"initial_backoff_ms":100,"multiplier":2.5}},{"key":"b","type":"t","deps":["a"],"queue":"q","priority":-3,"lease_ms":1000,"revert_type":"undo","timeout_ms":10,"schedule_to_start_ms":20}]}`,
	` { "tasks" : [ { "key" : "w" , "type" : "wait" , "signal" : "go" , "input" : null , "retry" : null } ] } `,
	`{"tasks":[{"key":"a","type":"t","Key":"b"}]}`,
	`{"tasks":[{"KEY":"a","type":"t"}]}`,
	`{"Tasks":[{"key":"a","type":"t"}]}`,
	`{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":1},"retry":{"multiplier":2}}]}`,
	`{"tasks":[{"key":"a","type":"t","colour":1}]}`,
	`{"tasks":[{"key":"a","type":5}]}`,
	`{"tasks":[null]}`,
	`{"tasks":null}`,
	`{"tasks":[]}`,
	`null`,
	`[]`,
	`{"tasks":[{"k\u0065y":"a","type":"t"}]}`,
	`{"tasks":[{"key":"a","type":"t","input":"\u00e9\\"}]}`,
	`{"tasks":[{"key":"a","type":"t"}]}x`,
	`{"tasks":[{"key":"a","type":"t","retry":{"max_attempts":"3"}}]}`,
	`{"tasks":[{"key":"a","type":"t","deps":[]}],"name":null}`,
}

// Whatever the fast path accepts, the general path accepts with the same
// spec and the same verdict; what it declines goes to the general path.
func FuzzParseSpecFast(f *testing.F) {
	for _, s := range fastSpecSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkFastSpec(t, raw)
	})
}

func TestParseSpecFastAgreesWithTheGeneralPath(t *testing.T) {
	taken := 0
	for _, s := range fastSpecSeeds {
		if checkFastSpec(t, []byte(s)) {
			taken++
		}
	}
	if taken < 3 {
		t.Fatalf("the fast path took %d of the well-formed seeds", taken)
	}
}

func checkFastSpec(t *testing.T, raw []byte) bool {
	t.Helper()
	fast, ok := parseSpecFast(raw)
	if !ok {
		return false
	}
	gen, err := parseSpecGeneral(raw, DefaultLimits)
	ferr := ValidateSpec(fast, DefaultLimits)
	if (err == nil) != (ferr == nil) || (err != nil && err.Error() != ferr.Error()) {
		t.Fatalf("%s: general %v, fast %v", raw, err, ferr)
	}
	if len(gen.Tasks) == 0 && len(fast.Tasks) == 0 {
		gen.Tasks, fast.Tasks = nil, nil // [] and absent both mean none
	}
	if !reflect.DeepEqual(gen, fast) {
		t.Fatalf("%s:\n general %+v\n fast    %+v", raw, gen, fast)
	}
	return true
}

// The spec of the side-by-side harness's jobs (one task, a 200-byte input).
func BenchmarkParseSpec(b *testing.B) {
	raw := []byte(`{"name":"job","tasks":[{"key":"run","type":"job","input":{"payload":"` +
		`0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"}}]}`)
	for _, path := range []struct {
		name  string
		parse func([]byte, Limits) (Spec, error)
	}{{"fast", ParseSpec}, {"general", parseSpecGeneral}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := path.parse(raw, DefaultLimits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A spec served from its shape (SpecShape, then FillInputs on the shape's
// parse) is ParseSpec's answer for the spec itself, and FillInputs declines
// exactly when an input would make ParseSpec fail.
func FuzzSpecShape(f *testing.F) {
	for _, s := range fastSpecSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"tasks":[{"key":"a","type":"t","input":{"seq":tru}}]}`))
	f.Add([]byte(`{"tasks":[{"key":"a","type":"t","input":1,"deps":[]},{"key":"b","type":"t","input":[1,  2]}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkSpecShape(t, raw)
	})
}

func TestSpecShapeServesWhatParseSpecReturns(t *testing.T) {
	for _, s := range append(fastSpecSeeds,
		`{"tasks":[{"key":"a","type":"t","input":{"seq":tru}}]}`,
		`{"tasks":[{"key":"a","type":"t","input":"x"},{"key":"b","type":"t","input":[1,  2],"deps":["a"]}]}`,
		`{"tasks":[{"key":"a","type":"t","input":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]}]}`) {
		checkSpecShape(t, []byte(s))
	}
}

func checkSpecShape(t *testing.T, raw []byte) {
	lim := DefaultLimits
	lim.MaxInputBytes = 64
	shape, inputs, ok := SpecShape(raw, nil)
	if !ok {
		return
	}
	base, err := ParseSpec(shape, lim)
	if err != nil {
		return // not cached
	}
	for _, task := range base.Tasks {
		if task.Input != nil {
			t.Fatalf("the shape %s kept an input", shape)
		}
	}
	want, werr := ParseSpec(raw, lim)
	got, ok := FillInputs(base, raw, inputs, lim)
	switch {
	case ok && werr != nil:
		t.Fatalf("%s: served from its shape, but ParseSpec says %v", raw, werr)
	case !ok && werr == nil:
		t.Fatalf("%s: declined, but ParseSpec accepts it", raw)
	case ok && !reflect.DeepEqual(got, want):
		t.Fatalf("%s: from its shape %+v, ParseSpec %+v", raw, got, want)
	}
}
