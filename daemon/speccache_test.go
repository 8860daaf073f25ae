package daemon

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

func TestSpecCacheAnswersAsParseSpec(t *testing.T) {
	var c specCache
	raw := []byte(`{"name":"w","tasks":[{"key":"a","type":"t","priority":2},{"key":"b","type":"t","deps":["a"]}]}`)
	want, err := domain.ParseSpec(raw, domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := c.parse(raw, domain.DefaultLimits)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("cached parse = %+v, %v; want %+v", got, err, want)
		}
	}
	// Validated for other limits, the cached spec is not reused.
	tight := domain.DefaultLimits
	tight.MaxTasks = 1
	if _, err := c.parse(raw, tight); err == nil {
		t.Fatal("a spec over the current task limit was served from the cache")
	}
	// Errors are never cached and are ParseSpec's own.
	bad := []byte(`{"tasks":[{"key":"a","type":"t","bogus":1}]}`)
	_, want1 := domain.ParseSpec(bad, domain.DefaultLimits)
	for range 2 {
		if _, err := c.parse(bad, domain.DefaultLimits); err == nil || err.Error() != want1.Error() {
			t.Fatalf("bad spec: %v, want %v", err, want1)
		}
	}
	// Specs that differ only in their task inputs share one entry (their
	// shape), and each answer is ParseSpec's, inputs included.
	before := len(c.m)
	for i := range 5 {
		in := `{"seq": ` + strconv.Itoa(i) + `, "pad": "x"}`
		raw := []byte(`{"name":"q","tasks":[{"key":"a","type":"t","input":` + in + `},{"key":"b","type":"t","deps":["a"],"input":[` + strconv.Itoa(i) + `]}]}`)
		want, err := domain.ParseSpec(raw, domain.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.parse(raw, domain.DefaultLimits)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("job %d: cached parse = %+v, %v; want %+v", i, got, err, want)
		}
		clear(raw) // the caller's buffer is reused: the spec must not alias it
		if string(got.Tasks[0].Input) != `{"seq":`+strconv.Itoa(i)+`,"pad":"x"}` {
			t.Fatalf("job %d: input %s changed with the request buffer", i, got.Tasks[0].Input)
		}
	}
	if len(c.m) != before+1 {
		t.Fatalf("five jobs of one workflow made %d cache entries, want 1", len(c.m)-before)
	}
	// A hit whose input is bad gets ParseSpec's report, not the cache's.
	small := domain.DefaultLimits
	small.MaxInputBytes = 8
	for _, raw := range []string{
		`{"name":"q","tasks":[{"key":"a","type":"t","input":{"seq":tru}},{"key":"b","type":"t","deps":["a"],"input":[1]}]}`,
		`{"name":"q","tasks":[{"key":"a","type":"t","input":{"seq":1}},{"key":"b","type":"t","deps":["a"],"input":[1,2,3,4,5,6]}]}`,
	} {
		lim := domain.DefaultLimits
		if raw[len(raw)-5] == '6' {
			lim = small
			// Warm the cache for these limits first.
			if _, err := c.parse([]byte(`{"name":"q","tasks":[{"key":"a","type":"t","input":1},{"key":"b","type":"t","deps":["a"],"input":2}]}`), lim); err != nil {
				t.Fatal(err)
			}
		}
		_, want := domain.ParseSpec([]byte(raw), lim)
		_, got := c.parse([]byte(raw), lim)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Fatalf("bad input %s: cached parse said %v, ParseSpec %v", raw, got, want)
		}
	}
	// Bounded.
	for i := range 3 * specCacheEntries {
		s := []byte(`{"tasks":[{"key":"k` + string(rune('a'+i%26)) + `","type":"t","priority":` + strconv.Itoa(i) + `}]}`)
		if _, err := c.parse(s, domain.DefaultLimits); err != nil {
			t.Fatal(err)
		}
		if len(c.m) > specCacheEntries {
			t.Fatalf("%d entries cached, bound %d", len(c.m), specCacheEntries)
		}
	}
}
