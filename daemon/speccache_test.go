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
	// A spec with a task input is per-job data: parsed, not kept.
	withInput := []byte(`{"tasks":[{"key":"a","type":"t","input":{"seq":1}}]}`)
	if _, err := c.parse(withInput, domain.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if _, kept := c.m[string(withInput)]; kept {
		t.Fatal("a spec carrying a task input was cached")
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
