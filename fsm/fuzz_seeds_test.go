package fsm

import (
	"encoding/json"
	"strings"
	"testing"
)

// Seed logs of the commands numbered 24 to 55 (schedules, signals,
// definitions, rate limits, ACL tokens, adaptive concurrency), each with
// accepted and rejected variants, so FuzzApply starts from every command
// type of that range (TestFuzzSeedsCoverCommands checks it).

// fuzzApplySeedNames are the FuzzApply seeds in testdata/fuzz/FuzzApply
// (seed-<name>).
var fuzzApplySeedNames = []string{"derived", "diamond", "multi", "odd", "schedule", "signal", "definition", "flow"}

func fuzzScenariosLater(tb testing.TB, out map[string][]Entry) {
	// Schedules (24-28), with a frozen spec whose task alerts when it stays
	// ready past schedule_to_start_ms.
	h := newHarness(tb)
	spec := fuzzSpec(tb, `{"name":"nightly","tasks":[{"key":"a","type":"t","schedule_to_start_ms":100,"schedule_to_start_policy":"alert"}]}`)
	h.ok(&ScheduleCreate{ID: "s1", IntervalMS: 1000, Spec: spec, Input: json.RawMessage(`{"n":1}`),
		Labels: map[string]string{"team": "data"}, Overlap: "buffer_one", CatchupWindowMS: 5000, NextFireAt: h.now + 1000})
	h.ok(&ScheduleCreate{ID: "s2", Cron: "*/5 * * * *", TZ: "Europe/Paris", Spec: spec, Paused: true, Note: "held", NextFireAt: h.now + 300_000})
	h.apply(&ScheduleCreate{ID: "bad id", IntervalMS: -1, Spec: spec})
	h.now += 1000
	due := h.now
	h.ok(&ScheduleFire{ID: "s1", Due: due, FireAt: due, Next: due + 1000})
	h.apply(&ScheduleFire{ID: "s1", Due: due, FireAt: due, Next: due + 1000}) // a duplicate fire
	h.now += 200
	h.ok(&Tick{}) // the run's task alerts
	h.now += 800
	h.ok(&ScheduleFire{ID: "s1", Due: due + 1000, FireAt: due + 1000, Next: due + 2000}) // buffered behind the first run
	h.ok(&SchedulePause{ID: "s1", Paused: true, Note: "maintenance"})
	h.ok(&SchedulePause{ID: "s1", Paused: false, Next: h.now + 1000})
	h.ok(&ScheduleTrigger{ID: "s1", RunID: "s1-now"})
	h.now += 10_000
	h.ok(&ScheduleFire{ID: "s1", Due: due + 2000, Next: h.now + 1000, Missed: 3, MissedFrom: due + 2000, MissedTo: due + 4000})
	h.ok(&ScheduleFire{ID: "s1", Due: h.now + 1000, Next: h.now + 2000, Release: true})
	h.ok(&ScheduleDelete{ID: "s2"})
	h.apply(&ScheduleDelete{ID: "nosuch"})
	out["schedule"] = h.log

	// Signals (30, 31).
	h = newHarness(tb)
	h.submit("w", `{"tasks":[{"key":"approve","type":"wait","signal":"go","timeout_ms":5000},
		{"key":"second","type":"wait","signal":"go"},{"key":"after","type":"t","deps":["approve","second"]}]}`)
	h.ok(&TaskSignal{TaskID: "w/approve", Token: 99, Payload: json.RawMessage(`1`)}) // a stale token
	h.ok(&TaskSignal{TaskID: "w/approve", Payload: json.RawMessage(`{"ok":true}`), SignalID: "sig-1"})
	h.ok(&TaskSignal{TaskID: "w/approve", Payload: json.RawMessage(`{"ok":true}`), SignalID: "sig-1"}) // its retry
	h.ok(&RunSignal{RunID: "w", Name: "go", Payload: json.RawMessage(`"yes"`), SignalID: "sig-2"})
	h.apply(&RunSignal{RunID: "nosuch", Name: "go"})
	h.apply(&TaskSignal{TaskID: "w/after", Payload: json.RawMessage(`1`)}) // not a wait task
	out["signal"] = h.log

	// Definitions (36, 37).
	h = newHarness(tb)
	h.ok(&DefinitionPut{Name: "etl", Spec: fuzzSpec(tb, `{"name":"etl","tasks":[{"key":"a","type":"t"}]}`), Note: "first"})
	h.ok(&DefinitionPut{Name: "etl", Version: 2, Spec: fuzzSpec(tb, `{"name":"etl","tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)})
	h.apply(&DefinitionPut{Name: "etl", Version: 1, Spec: fuzzSpec(tb, `{"name":"etl","tasks":[{"key":"x","type":"u"}]}`)}) // immutable
	h.ok(&SubmitDefinition{Definition: "etl", ID: "d1", Labels: map[string]string{"env": "prod"}, Nonce: "n1"})
	h.ok(&SubmitDefinition{Definition: "etl", Version: 1, ID: "d2", DelayMS: 5000})
	h.apply(&SubmitDefinition{Definition: "nosuch", ID: "d3"})
	out["definition"] = h.log

	// Rate limits (40), adaptive concurrency (54, 55), ACL tokens (46, 47).
	h = newHarness(tb)
	h.submit("f", `{"tasks":[{"key":"a","type":"t","queue":"q"},{"key":"b","type":"t","queue":"q"},
		{"key":"c","type":"u","queue":"q"},{"key":"d","type":"t","queue":"q"}]}`)
	h.ok(&RateLimitSet{Queue: "q", RateMilli: 2000, Burst: 2})
	h.ok(&RateLimitSet{Queue: "q", TaskType: "u", RateMilli: 500, Burst: 1})
	h.apply(&RateLimitSet{Queue: "q", RateMilli: -1})
	h.ok(&Claim{Waiters: []Waiter{{WorkerID: "w1", Max: 4, Queues: []string{"q"}}}})
	h.now += 500
	h.ok(&Claim{Waiters: []Waiter{{WorkerID: "w2", Max: 4, Queues: []string{"q"}}}})
	h.ok(&QueueAuto{Name: "q", Min: 1, Max: 3, TargetLatencyMS: 100})
	h.ok(&QueueCap{Name: "q", From: 3, Cap: 1, LatencyMS: 500, Samples: 3})
	h.ok(&QueueCap{Name: "q", From: 3, Cap: 2, LatencyMS: 50, Samples: 3}) // a lost race: the cap is 1
	h.apply(&QueueAuto{Name: "q", Min: 4, Max: 2})
	h.ok(&QueueSet{Name: "q", Concurrency: 5}) // auto off
	h.ok(&RateLimitSet{Queue: "q"})            // limit off
	h.ok(&ACLTokenCreate{ID: "t1", Name: "ci", Role: "worker", Hash: strings.Repeat("ab", 32)})
	h.apply(&ACLTokenCreate{ID: "t2", Role: "root", Hash: "x"})
	h.ok(&ACLTokenDelete{ID: "t1"})
	h.apply(&ACLTokenDelete{ID: "t1"})
	out["flow"] = h.log
}

// Every command type from 24 to 55 that Decode knows starts a seed entry.
func TestFuzzSeedsCoverCommands(t *testing.T) {
	seen := map[MsgType]bool{}
	for _, log := range fuzzScenarios(t) {
		for _, e := range log {
			if len(e.Data) > 0 {
				seen[MsgType(e.Data[0])&^IgnoreUnknown] = true
			}
		}
	}
	for typ := MsgType(24); typ <= 55; typ++ {
		if _, err := Decode([]byte{byte(typ), '{', '}'}); err != nil && strings.Contains(err.Error(), "unknown") {
			continue // no such command
		}
		if !seen[typ] {
			t.Errorf("no fuzz seed applies command %d (%s)", typ, typ)
		}
	}
}
