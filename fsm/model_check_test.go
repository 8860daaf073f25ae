package fsm

import (
	"bytes"
	"slices"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
	"pgregory.net/rapid"
)

// ---- invariants, checked after every action ----

func (m *model) check(rt *rapid.T) {
	f := m.h.f
	// m/rules_runs counts the rules records exactly (apply_decide.go).
	_ = f.View(func(r Reader) error {
		n := uint64(0)
		_ = r.Scan(pfxRules, nil, false, func(_, _ []byte) bool { n++; return true })
		v, ok, _ := r.Get(keyRulesRuns)
		if got := uint64(0); ok && getU64(v) != n || !ok && n != got {
			rt.Fatalf("m/rules_runs says %x, %d rules records", v, n)
		}
		return nil
	})
	// The derived indexes are exactly what the records say (so a store can
	// keep them in memory and rebuild them from the records).
	_ = f.View(func(r Reader) error {
		live := map[string]bool{}
		for _, p := range derivedPrefixes {
			if err := r.Scan(p, nil, false, func(k, _ []byte) bool { live[string(k)] = true; return true }); err != nil {
				rt.Fatal(err)
			}
		}
		rebuilt := map[string]bool{}
		if err := deriveIndexes(r, func(k []byte) { rebuilt[string(k)] = true }); err != nil {
			rt.Fatal(err)
		}
		for k := range live {
			if !rebuilt[k] {
				rt.Fatalf("index key %q is not derivable from the records", k)
			}
		}
		for k := range rebuilt {
			if !live[k] {
				rt.Fatalf("the records derive index key %q the applier did not write", k)
			}
		}
		return nil
	})
	leases := map[string]int64{}
	_ = f.View(func(r Reader) error {
		return r.Scan(pfxLease, nil, false, func(k, _ []byte) bool {
			id := string(k[len(pfxLease)+8:])
			if _, dup := leases[id]; dup {
				rt.Fatalf("task %s has two live leases", id)
			}
			leases[id] = int64(getU64(k[len(pfxLease):len(pfxLease)+8]) ^ (1 << 63))
			return true
		})
	})
	ready := map[string]bool{}
	_ = f.View(func(r Reader) error {
		return r.Scan(pfxReady, nil, false, func(k, _ []byte) bool {
			rest := k[len(pfxReady):]
			i := bytes.IndexByte(rest, 0)
			j := i + 1 + bytes.IndexByte(rest[i+1:], 0)
			ready[string(rest[j+13:])] = true
			return true
		})
	})
	running := 0
	for _, mr := range m.runs {
		run, tasks, err := f.GetRun(mr.id)
		if err != nil {
			rt.Fatal(err)
		}
		if run.State != mr.state {
			rt.Fatalf("run %s is %s, model says %s", mr.id, run.State, mr.state)
		}
		if len(tasks) != len(mr.tasks) {
			rt.Fatalf("run %s has %d tasks, model %d", mr.id, len(tasks), len(mr.tasks))
		}
		counts := map[domain.TaskState]int{}
		for i, ft := range tasks {
			mt := mr.tasks[i]
			counts[ft.State]++
			comp, compAttempt, compUnacked := "", 0, 0
			if ft.Comp != nil {
				comp, compAttempt, compUnacked = ft.Comp.Phase, ft.Comp.Attempt, ft.Comp.Unacked
			}
			if ft.Unacked != mt.unacked || compUnacked != mt.compUnacked {
				rt.Fatalf("task %s: unacked expiries %d/%d, model %d/%d", mt.id(), ft.Unacked, compUnacked, mt.unacked, mt.compUnacked)
			}
			if ft.Key != mt.key || ft.State != mt.state || ft.Attempt != mt.attempt || ft.FencingToken != mt.token ||
				comp != mt.comp || compAttempt != mt.compAttempt || ft.RetryAt != mt.retryAt ||
				!bytes.Equal(ft.Result, mt.result) {
				rt.Fatalf("task %s: fsm {%s attempt %d token %d comp %q/%d retry_at %d result %s}, model {%s attempt %d token %d comp %q/%d retry_at %d result %s}",
					mt.id(), ft.State, ft.Attempt, ft.FencingToken, comp, compAttempt, ft.RetryAt, ft.Result,
					mt.state, mt.attempt, mt.token, mt.comp, mt.compAttempt, mt.retryAt, mt.result)
			}
			hasLease := ft.LeaseOwner != "" && ft.LeaseExpiresAt != 0
			if (ft.State == domain.TaskRunning) != (hasLease && ft.Comp == nil) || ft.Leased() != hasLease ||
				hasLease != mt.leased || ft.LeaseExpiresAt != mt.leaseExp {
				rt.Fatalf("task %s: state %s comp %q owner %q expiry %d; model leased %v until %d",
					mt.id(), ft.State, comp, ft.LeaseOwner, ft.LeaseExpiresAt, mt.leased, mt.leaseExp)
			}
			if exp, ok := leases[mt.id()]; ok != hasLease || (ok && exp != ft.LeaseExpiresAt) {
				rt.Fatalf("task %s: lease index %v/%d, record %v/%d", mt.id(), ok, exp, hasLease, ft.LeaseExpiresAt)
			}
			if hasLease {
				running++
			}
			if want := m.dispatchable(mt); ft.Indexed != want || ready[mt.id()] != want {
				rt.Fatalf("task %s (%s, comp %q, run %s): indexed %v, in ready index %v, model dispatchable %v",
					mt.id(), ft.State, comp, mr.state, ft.Indexed, ready[mt.id()], want)
			}
			if len(ft.Attempts) != len(mt.attempts) {
				rt.Fatalf("task %s: %d attempts, model %d", mt.id(), len(ft.Attempts), len(mt.attempts))
			}
			succeeded := map[bool]int{}
			for j, a := range ft.Attempts {
				if w := mt.attempts[j]; a.Token != w.token || a.Outcome != w.outcome || a.Compensation != w.comp || (a.AckedAt != 0) != w.acked {
					rt.Fatalf("task %s attempt %d: %+v, model %+v", mt.id(), j, a, w)
				}
				if j > 0 && a.Token <= ft.Attempts[j-1].Token {
					rt.Fatalf("task %s: fencing tokens do not increase: %+v", mt.id(), ft.Attempts)
				}
				if a.Outcome == OutcomeSucceeded {
					succeeded[a.Compensation]++
				}
			}
			if (succeeded[false] > 1 && !mt.finally) || succeeded[true] > 1 { // a retry runs finally tasks again
				rt.Fatalf("task %s succeeded more than once: %+v", mt.id(), ft.Attempts)
			}
		}
		for s, n := range run.Counts {
			if counts[s] != n {
				rt.Fatalf("run %s counts %v, tasks say %v", mr.id, run.Counts, counts)
			}
		}
	}
	if len(ready) != countTrue(m, m.dispatchable) || len(leases) != running {
		rt.Fatalf("index holds %d ready and %d leases for unknown tasks", len(ready), len(leases))
	}
	qs, _ := f.Queues()
	if len(qs) == 1 && (qs[0].Running != running || qs[0].Ready != len(ready)) {
		rt.Fatalf("queue %+v, want running %d ready %d", qs[0], running, len(ready))
	}
	if len(qs) == 1 {
		m.checkFlow(rt, &qs[0].QueueState)
	} else if len(qs) == 0 {
		m.checkFlow(rt, nil)
	}
	evs, _, err := f.Events(m.evNext, "", 0)
	if err != nil {
		rt.Fatal(err)
	}
	for _, ev := range evs {
		if (ev.Kind != "run" && ev.Kind != "task") || ev.From == "" {
			continue
		}
		var ok bool
		if ev.Kind == "run" {
			e, found := domain.RunMachine.Edge(ev.Transition)
			ok = found && slices.Contains(e.From, domain.RunState(ev.From)) && string(e.To) == ev.To
		} else {
			e, found := domain.TaskMachine.Edge(ev.Transition)
			ok = found && slices.Contains(e.From, domain.TaskState(ev.From)) && string(e.To) == ev.To
		}
		if !ok {
			rt.Fatalf("event %+v is not an edge of the %s machine", ev, ev.Kind)
		}
	}
	m.evNext = m.h.index + 1
	m.checkStored(rt)
	m.checkChildren(rt) // model_child_test.go
}

func countTrue(m *model, pred func(*mTask) bool) int {
	n := 0
	for _, t := range m.all() {
		if pred(t) {
			n++
		}
	}
	return n
}

func TestModelRandomCommands(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rapidTB{TB: t, rt: rt})
		h.ok(&SettingsSet{BreakerFailures: ptr(-1)}) // claims are predictable without breakers
		h.ok(&SetVersion{Version: MaxVersion})       // trigger rules and conditions (model_decide_test.go)
		m := &model{h: h}
		m.putChildDefs(rt, 0) // child runs' definitions (model_child_test.go)
		rt.Repeat(map[string]func(*rapid.T){
			"submit":    m.submit,
			"claim":     m.claim,
			"complete":  m.complete,
			"fail":      m.fail,
			"heartbeat": m.heartbeat,
			"stale":     m.stale,
			"reap":      m.reap,
			"tick":      m.tick,
			"verb":      m.verb,
			"retry":     m.retryRun, // model_retry_test.go
			"signal":    m.signal,
			// Flow control (model_flow_test.go): claims lease no more than
			// the rate limits and the cap allow.
			"rate_limit": m.rateLimit,
			"queue_auto": m.queueAuto,
			"queue_cap":  m.queueCap,
			"queue_set":  m.queueSet,
			"":           m.check,
		})
		checkReplay(h.t, h, 2, rapid.Uint64().Draw(rt, "replay_seed"))
	})
}
