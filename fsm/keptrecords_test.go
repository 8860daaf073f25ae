package fsm

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Keeping queue and breaker records cached across an entry's commands
// (flush) is an optimisation only: a workload of group entries (submits
// with the claims riding in them, completions, retryable failures that
// trip a breaker, rejected commands, queue pauses and deletes) leaves
// exactly the state it leaves when every command reloads them.
func TestKeptQueueRecordsChangeNothing(t *testing.T) {
	run := func(keep bool) (digest string, results string) {
		keepQueueRecords = keep
		defer func() { keepQueueRecords = true }()
		f, err := New(store.NewMemStore(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := domain.ParseSpec([]byte(`{"name":"q","tasks":[{"key":"a","type":"noop","input":{"x":1}},{"key":"b","type":"flaky","deps":["a"],"queue":"q2","retry":{"max_attempts":3}}]}`), domain.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		var index uint64
		at := func() int64 { return 1_700_000_000_000 + int64(index)*250 } // retries and cool-downs come due
		enc := func(c Command) []byte {
			c.Stamp(at())
			b, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		var out []any
		apply := func(c Command) any {
			buf := enc(c)
			index++
			res := f.ApplyBatch([]Entry{{Index: index, Data: buf}})[0]
			out = append(out, res)
			return res
		}
		two, three, cool := 2, 3, int64(100)
		apply(&SettingsSet{BreakerFailures: &two, BreakerCooldownMS: &cool, MaxRunningRuns: &three})
		waiters := []Waiter{{WorkerID: "w1", Max: 2}, {WorkerID: "w2", Types: []string{"flaky"}, Max: 1}, {WorkerID: "w3", Queues: []string{"q2"}, Max: 3}}
		yes, n := true, 0
		var carried [][]Claimed
		for round := range 40 {
			m := &Multi{}
			for range 4 {
				n++
				m.Cmds = append(m.Cmds, enc(&Submit{ID: fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", n), Spec: spec}))
			}
			m.Cmds = append(m.Cmds, enc(&Submit{ID: "not a uuid", Spec: spec}), enc(&Claim{Waiters: waiters}))
			if round == 5 || round == 8 {
				m.Cmds = append(m.Cmds, enc(&QueuePause{Name: "q2", Paused: round == 5}))
			}
			if round%6 == 5 {
				m.Cmds = append(m.Cmds, enc(&QueueDelete{Name: "empty"}), enc(&QueueSet{Name: "empty", Concurrency: 2}))
			}
			claimed := carried
			carried = nil
			if mr, ok := apply(m).(*MultiResult); ok {
				for _, x := range mr.Results {
					if cr, ok := x.(*ClaimResult); ok {
						claimed = append(claimed, cr.Assigned...)
					}
				}
			}
			if cr, ok := apply(&Claim{Waiters: waiters}).(*ClaimResult); ok {
				claimed = append(claimed, cr.Assigned...)
			}
			done := &Multi{}
			{
				for _, got := range claimed {
					for i, c := range got {
						if c.Type == "flaky" && (round < 16 || i%2 == 0) {
							done.Cmds = append(done.Cmds, enc(&Fail{TaskID: c.TaskID, Token: c.FencingToken, Error: "boom", Retryable: &yes}))
							continue
						}
						done.Cmds = append(done.Cmds, enc(&Complete{TaskID: c.TaskID, Token: c.FencingToken, Result: json.RawMessage(`{"ok":true}`)}))
					}
				}
			}
			done.Cmds = append(done.Cmds, enc(&Complete{TaskID: "nope/x", Token: 1}), enc(&Claim{Waiters: waiters[:1]}))
			if mr, ok := apply(done).(*MultiResult); ok {
				if cr, ok := mr.Results[len(mr.Results)-1].(*ClaimResult); ok {
					carried = cr.Assigned // completed in the next round
				}
			}
			apply(&Tick{})
			apply(&Reap{})
		}
		acks := 0 // accepted completions and failures
		for _, r := range out {
			if mr, ok := r.(*MultiResult); ok {
				for _, x := range mr.Results {
					if ack, ok := x.(*AckResult); ok && ack.Accepted {
						acks++
					}
				}
			}
		}
		if acks < 30 {
			t.Fatalf("only %d commands accepted in group entries: the workload stalled", acks)
		}
		breakers := 0
		_ = f.View(func(r Reader) error {
			return r.Scan(pfxBreaker, nil, false, func(_, _ []byte) bool { breakers++; return true })
		})
		if breakers == 0 {
			t.Fatal("no breaker record was written: the workload does not exercise breakers")
		}
		d, _, err := f.Digest()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(out)
		return d, string(b)
	}
	kept, keptRes := run(true)
	reloaded, reloadedRes := run(false)
	if kept != reloaded {
		t.Errorf("state digest %s with queue records kept across commands, %s with them reloaded", kept, reloaded)
	}
	if keptRes != reloadedRes {
		t.Errorf("results differ:\nkept     %s\nreloaded %s", keptRes, reloadedRes)
	}
}
