package fsm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of time limits: task timeout_ms, schedule_to_start_ms, run
// deadline_ms and delayed start. Every test replays its log in random
// batch sizes (newSem) and checks the derived indexes against the records.

// checkDerived fails if the live derived indexes differ from what the
// records derive (the wake-up index now holds run timers and ready timers).
func checkDerived(t testing.TB, f *FSM) {
	t.Helper()
	err := f.View(func(r Reader) error {
		live, rebuilt := map[string]bool{}, map[string]bool{}
		for _, p := range derivedPrefixes {
			if err := r.Scan(p, nil, false, func(k, _ []byte) bool { live[string(k)] = true; return true }); err != nil {
				return err
			}
		}
		if err := deriveIndexes(r, func(k []byte) { rebuilt[string(k)] = true }); err != nil {
			return err
		}
		for k := range live {
			if !rebuilt[k] {
				t.Errorf("index key %q is not derivable from the records", k)
			}
		}
		for k := range rebuilt {
			if !live[k] {
				t.Errorf("the records derive index key %q the applier did not write", k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func wakeKeys(t testing.TB, f *FSM) int {
	t.Helper()
	n := 0
	_ = f.View(func(r Reader) error {
		return r.Scan(pfxWake, nil, false, func(_, _ []byte) bool { n++; return true })
	})
	return n
}

func TestTaskTimeoutCapsLeaseFailsAttemptAndRetries(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","lease_ms":2000,"timeout_ms":5000,
		"retry":{"max_attempts":2,"initial_backoff_ms":100}}]}`)
	claimAt := h.now
	c := h.claimOne("w1")
	if c.TimeoutMS != 5000 || c.DeadlineAt != claimAt+5000 || c.LeaseExpiresAt != claimAt+2000 {
		t.Fatalf("claim %+v: want timeout 5000, deadline %d, lease until %d", c, claimAt+5000, claimAt+2000)
	}
	h.now += 1000
	if res := h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken}).(*AckResult); !res.Accepted || res.LeaseExpiresAt != h.now+2000 {
		t.Fatalf("heartbeat before the timeout: %+v", res)
	}
	h.now = claimAt + 4000
	if res := h.ok(&Heartbeat{TaskID: c.TaskID, Token: c.FencingToken}).(*AckResult); !res.Accepted || res.LeaseExpiresAt != claimAt+5000 {
		t.Fatalf("heartbeat near the timeout: %+v, want the lease capped at %d", res, claimAt+5000)
	}
	// The worker stalls; the reaper comes at the lease end = the timeout.
	h.now = claimAt + 5000
	h.ok(&Reap{})
	tk := h.task("r", "a")
	if tk.State != domain.TaskRetrying || !strings.Contains(tk.Error, "timeout_ms 5000") || tk.Attempts[0].Outcome != OutcomeTimedOut {
		t.Fatalf("after the timeout: %+v", tk)
	}
	if !hasTransition(runEvents(h, "r"), "task", "a", domain.EdgeTimeout) {
		t.Fatal("no timeout event")
	}
	// The stalled worker's late completion is fenced off.
	if h.complete(c, `"late"`) {
		t.Fatal("late completion accepted")
	}
	h.now += 100
	h.ok(&Tick{})
	c2 := h.claimOne("w2")
	if c2.Attempt != 2 || c2.FencingToken <= c.FencingToken || c2.DeadlineAt != h.now+5000 {
		t.Fatalf("second attempt %+v", c2)
	}
	// A completion that arrives after the deadline, before any reap, is
	// too late as well: the attempt times out in that entry.
	h.now += 5000
	if h.complete(c2, `"late too"`) {
		t.Fatal("completion past the timeout accepted")
	}
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskFailed})
	h.wantRun("r", domain.RunFailed)
	checkDerived(t, h.f)
}

func TestTaskTimeoutCompletionInTimeIsAccepted(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","timeout_ms":1000}]}`)
	c := h.claimOne("w")
	h.now += 999
	if !h.complete(c, `1`) {
		t.Fatal("completion within the timeout rejected")
	}
	h.wantRun("r", domain.RunSucceeded)
	checkDerived(t, h.f)
}

// An attempt its worker never acknowledged spends nothing when it times
// out (a fault: the claim answer may have been lost).
func TestTaskTimeoutUnackedIsFree(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","timeout_ms":500}]}`)
	c := h.claimOne("w")
	h.now += 500
	h.ok(&Reap{})
	tk := h.task("r", "a")
	if tk.State != domain.TaskReady || tk.Attempt != 0 || tk.Attempts[0].Outcome != OutcomeLeaseUnacked {
		t.Fatalf("unacked timeout: %+v", tk)
	}
	c2 := h.claimOne("w")
	if c2.Attempt != 1 || h.complete(c, `1`) || !h.complete(c2, `1`) {
		t.Fatalf("reclaim %+v", c2)
	}
	checkDerived(t, h.f)
}

func TestScheduleToStartFailsAnUnclaimedTask(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":500,"retry":{"max_attempts":3}},
		{"key":"b","type":"t","schedule_to_start_ms":500}]}`)
	c := h.claim("w", 1, "t")[0] // one of them is claimed in time
	h.now += 499
	h.ok(&Tick{})
	h.wantRun("r", domain.RunRunning)
	h.now++
	h.ok(&Tick{})
	other := "a"
	if c.TaskKey == "a" {
		other = "b"
	}
	tk := h.task("r", other)
	if tk.State != domain.TaskFailed || !strings.Contains(tk.Error, "schedule_to_start") {
		t.Fatalf("unclaimed task: %+v", tk)
	}
	if h.taskState("r", c.TaskKey) != domain.TaskRunning {
		t.Fatalf("the claimed task changed: %+v", h.task("r", c.TaskKey))
	}
	h.complete(c, `1`)
	h.wantRun("r", domain.RunFailed)
	if wakeKeys(t, h.f) != 0 {
		t.Fatal("a timer outlived its task")
	}
	checkDerived(t, h.f)
}

func TestRunDeadlineCancelsTheRun(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"deadline_ms":1000,"tasks":[{"key":"a","type":"t"},{"key":"b","type":"t","deps":["a"]}]}`)
	r, _ := h.run("r")
	if r.DeadlineAt != h.now+1000 {
		t.Fatalf("deadline_at %d", r.DeadlineAt)
	}
	c := h.claimOne("w")
	h.now += 999
	h.ok(&Tick{})
	h.wantRun("r", domain.RunRunning)
	h.now++
	h.ok(&Tick{})
	h.wantRun("r", domain.RunCancelled)
	h.wantTasks("r", map[string]domain.TaskState{"a": domain.TaskCancelled, "b": domain.TaskCancelled})
	if r, _ := h.run("r"); !strings.Contains(r.Reason, "deadline_ms 1000") {
		t.Fatalf("reason %q", r.Reason)
	}
	if h.complete(c, `1`) {
		t.Fatal("completion after the deadline accepted")
	}
	if wakeKeys(t, h.f) != 0 {
		t.Fatal("the deadline timer outlived the run")
	}
	checkDerived(t, h.f)
}

func TestRunDeadlineRevertsWithOnFailureRevert(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"deadline_ms":1000,"on_failure":"revert","tasks":[{"key":"a","type":"t","revert_type":"undo"},{"key":"b","type":"t","deps":["a"]}]}`)
	h.forward("w", "a")
	h.now += 1000
	h.ok(&Tick{})
	h.wantRun("r", domain.RunReverting)
	if got := h.drainCompensations("r"); len(got) != 1 || got[0][0] != "a" {
		t.Fatalf("compensations %v", got)
	}
	h.wantRun("r", domain.RunReverted)
	checkDerived(t, h.f)
}

// An interrupted run keeps its deadline; a finished run drops it.
func TestRunDeadlineInterruptedAndFinished(t *testing.T) {
	h := newSem(t)
	h.submit("i", `{"deadline_ms":1000,"tasks":[{"key":"a","type":"t"}]}`)
	h.submit("f", `{"deadline_ms":1000,"tasks":[{"key":"a","type":"u"}]}`)
	h.verb(MsgInterrupt, "i")
	h.forward("w", "a")
	h.wantRun("f", domain.RunSucceeded)
	h.now += 1000
	h.ok(&Tick{})
	h.wantRun("i", domain.RunCancelled)
	h.wantRun("f", domain.RunSucceeded)
	checkDerived(t, h.f)
}

func TestDelayedStart(t *testing.T) {
	h := newSem(t)
	s, err := domain.ParseSpec([]byte(`{"deadline_ms":5000,"tasks":[{"key":"a","type":"t"}]}`), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	submitAt := h.now
	res := h.ok(&Submit{ID: "d", Spec: s, DelayMS: 10_000}).(*SubmitResult)
	if res.State != domain.RunPending {
		t.Fatalf("delayed run %+v", res)
	}
	r, _ := h.run("d")
	if r.StartAt != submitAt+10_000 || r.StartedAt != 0 || r.DeadlineAt != 0 {
		t.Fatalf("delayed run record %+v", r)
	}
	h.wantNoClaim("w")
	// A retried submit does not move the start.
	h.now += 5000
	h.ok(&Submit{ID: "d", Spec: s, DelayMS: 10_000})
	h.now = submitAt + 9_999
	h.ok(&Tick{})
	h.wantRun("d", domain.RunPending)
	h.now++
	h.ok(&Tick{})
	h.wantRun("d", domain.RunRunning)
	r, _ = h.run("d")
	if r.StartedAt != submitAt+10_000 || r.DeadlineAt != r.StartedAt+5000 {
		t.Fatalf("started run %+v: the deadline counts from the start", r)
	}
	h.forward("w", "a")
	h.wantRun("d", domain.RunSucceeded)

	// start_at in the past starts at once; start_at and delay_ms together
	// are refused.
	h.ok(&Submit{ID: "past", Spec: s, StartAt: h.now - 1})
	h.wantRun("past", domain.RunRunning)
	wantErr(t, h.apply(&Submit{ID: "both", Spec: s, StartAt: h.now + 1, DelayMS: 1}), ErrInvalidArgument)
	checkDerived(t, h.f)
}

func TestDelayedStartRespectsTheRunCapAndCancel(t *testing.T) {
	h := newSem(t)
	h.ok(&SettingsSet{MaxRunningRuns: ptr(1)})
	h.submit("busy", `{"tasks":[{"key":"a","type":"t"}]}`)
	s, _ := domain.ParseSpec([]byte(`{"tasks":[{"key":"a","type":"t"}]}`), domain.DefaultLimits)
	h.ok(&Submit{ID: "late", Spec: s, StartAt: h.now + 1000})
	h.ok(&Submit{ID: "gone", Spec: s, StartAt: h.now + 1000})
	if !h.verb(MsgCancelRun, "gone") {
		t.Fatal("cancel of a scheduled run")
	}
	h.now += 1000
	h.ok(&Tick{})
	h.wantRun("late", domain.RunPending) // its time came, but the cap is full
	h.wantRun("gone", domain.RunCancelled)
	h.forward("w", "a")
	h.wantRun("late", domain.RunRunning) // admitted when busy finished
	checkDerived(t, h.f)
}

func TestTimeoutSpecValidation(t *testing.T) {
	bad := map[string]string{
		`{"tasks":[{"key":"a","type":"t","timeout_ms":-1}]}`:                        "timeout_ms",
		`{"tasks":[{"key":"a","type":"t","timeout_ms":5}]}`:                         "minimum",
		`{"deadline_ms":-5,"tasks":[{"key":"a","type":"t"}]}`:                       "deadline_ms",
		`{"tasks":[{"key":"a","type":"t","signal":"go"}]}`:                          "only a task of type",
		`{"tasks":[{"key":"a","type":"wait","schedule_to_start_ms":100}]}`:          "never claimed",
		`{"tasks":[{"key":"a","type":"wait","signal":"bad name"}]}`:                 "signal",
		`{"tasks":[{"key":"a","type":"t","schedule_to_start_ms":999999999999999}]}`: "schedule_to_start_ms",
	}
	for spec, want := range bad {
		_, err := domain.ParseSpec([]byte(spec), domain.DefaultLimits)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a problem naming %q", spec, err, want)
		}
	}
	s, err := domain.ParseSpec([]byte(`{"deadline_ms":60000,"tasks":[{"key":"a","type":"wait","signal":"approve","timeout_ms":1000},
		{"key":"b","type":"t","timeout_ms":100,"schedule_to_start_ms":100,"deps":["a"]}]}`), domain.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	for _, f := range []string{`"deadline_ms":60000`, `"signal":"approve"`, `"schedule_to_start_ms":100`} {
		if !strings.Contains(string(b), f) {
			t.Errorf("spec %s lost %s", b, f)
		}
	}
}
