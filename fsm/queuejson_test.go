package fsm

import (
	"bytes"
	"testing"

	gojson "github.com/goccy/go-json"
	"pgregory.net/rapid"

	"github.com/flowd/flowd/fsm/domain"
)

// The hand-written queue record encoding writes exactly goccy's bytes
// whenever it does not decline, declines only what it must, and takes
// every record of plain names without rate limits, automatic concurrency
// or paused runs: replicas of different builds write identical records.
func TestQueueJSONEqualsGoccy(t *testing.T) {
	names := rapid.OneOf(
		rapid.StringMatching(`[a-z0-9._:-]{0,12}`),
		rapid.SampledFrom([]string{"", "a<b", "x&y", `q"u`, `b\s`, "tab\t", "é", "\u2028", "\xff", "~ ok", "\x7f"}),
	)
	rapid.Check(t, func(rt *rapid.T) {
		q := QueueState{
			Name:        names.Draw(rt, "name"),
			Ready:       rapid.IntRange(-3, 1<<40).Draw(rt, "ready"),
			Running:     rapid.IntRange(-3, 1<<20).Draw(rt, "running"),
			Concurrency: rapid.IntRange(0, 1000).Draw(rt, "concurrency"),
			Paused:      rapid.Bool().Draw(rt, "paused"),
			Leased:      rapid.Uint64().Draw(rt, "leased"),
			Throttled:   rapid.SampledFrom([]uint64{0, 1, 1 << 63}).Draw(rt, "throttled"),
		}
		if rapid.Bool().Draw(rt, "types") {
			q.Types = rapid.MapOfN(names, rapid.IntRange(-1, 1<<30), 0, 12).Draw(rt, "types map")
		}
		plain := plainJSON(q.Name)
		for k := range q.Types {
			plain = plain && plainJSON(k)
		}
		switch rapid.IntRange(0, 5).Draw(rt, "extra") {
		case 1:
			q.Auto, plain = &domain.AutoConcurrency{}, false
		case 2:
			q.Limit, plain = &domain.RateLimit{}, false
		case 3:
			q.TypeLimits, plain = map[string]*domain.RateLimit{}, false
		case 4:
			q.PausedRuns, plain = []string{"r1"}, false
		}
		want, err := gojson.Marshal(&q)
		if err != nil {
			rt.Fatal(err)
		}
		got, ok := q.appendJSON([]byte("prefix"))
		if ok != plain {
			rt.Fatalf("hand path taken %v, want %v for %+v", ok, plain, q)
		}
		if !ok {
			return
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			rt.Fatalf("hand-written\n%s\ngoccy\n%s", got[len("prefix"):], want)
		}
		if m, err := marshal(&q); err != nil || !bytes.Equal(m, want) {
			rt.Fatalf("marshal: %s %v", m, err)
		}
		var back QueueState
		if err := unmarshal(got[len("prefix"):], &back); err != nil || back.Name != q.Name || back.Leased != q.Leased || len(back.Types) != len(q.Types) {
			rt.Fatalf("decoded %+v (%v), from %+v", back, err, q)
		}
	})
}
