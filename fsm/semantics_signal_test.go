package fsm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// Semantics of wait tasks and signals.

const approval = `{"tasks":[
 {"key":"prep","type":"t"},
 {"key":"approve","type":"wait","deps":["prep"]},
 {"key":"ship","type":"t","deps":["approve"]}]}`

func (h *harness) signal(run, key, payload, id string) *SignalResult {
	h.t.Helper()
	return h.ok(&TaskSignal{TaskID: run + "/" + key, Payload: json.RawMessage(payload), SignalID: id}).(*SignalResult)
}

func TestWaitTaskIsCompletedBySignalAndDependentsGetThePayload(t *testing.T) {
	h := newSem(t)
	h.submit("r", approval)
	// Before it waits (its dependency runs), a signal is a lost race.
	if res := h.signal("r", "approve", `{"ok":true}`, "s0"); res.Accepted || res.State != domain.TaskPending {
		t.Fatalf("signal to a pending wait task: %+v", res)
	}
	h.forward("w", "prep")
	tk := h.task("r", "approve")
	if tk.State != domain.TaskReady || tk.Attempt != 1 || tk.FencingToken == 0 {
		t.Fatalf("waiting task %+v", tk)
	}
	h.wantNoClaim("w") // no worker ever claims a wait task
	h.wantNoClaim("w", domain.TypeWait)
	// A signal naming another wait (a stale token) is a lost race.
	if res := h.ok(&TaskSignal{TaskID: "r/approve", Token: tk.FencingToken + 1, Payload: json.RawMessage(`1`)}).(*SignalResult); res.Accepted {
		t.Fatalf("stale token accepted: %+v", res)
	}
	if res := h.signal("r", "approve", `{"by":"ann"}`, "s1"); !res.Accepted || res.State != domain.TaskSucceeded {
		t.Fatalf("signal: %+v", res)
	}
	// The same signal again is accepted and changes nothing; another is a
	// lost race.
	before := stateDigest(t, h.f)
	if res := h.signal("r", "approve", `{"by":"ann"}`, "s1"); !res.Accepted {
		t.Fatalf("re-sent signal: %+v", res)
	}
	if stateDigest(t, h.f) != before {
		t.Fatal("a re-sent signal changed the state")
	}
	if res := h.signal("r", "approve", `{"by":"bob"}`, "s2"); res.Accepted {
		t.Fatalf("second signal: %+v", res)
	}
	c := h.claimOne("w")
	if c.TaskKey != "ship" || string(c.DepResults["approve"]) != `{"by":"ann"}` {
		t.Fatalf("dependent claim %+v", c)
	}
	h.complete(c, `1`)
	h.wantRun("r", domain.RunSucceeded)
	if !hasTransition(runEvents(h, "r"), "task", "approve", domain.EdgeSignal) {
		t.Fatal("no signal event")
	}
	checkDerived(t, h.f)
}

func TestSignalErrors(t *testing.T) {
	h := newSem(t)
	h.submit("r", approval)
	wantErr(t, h.apply(&TaskSignal{TaskID: "r/prep", Payload: json.RawMessage(`1`)}), ErrInvalidArgument)
	wantErr(t, h.apply(&TaskSignal{TaskID: "r/nope"}), ErrNotFound)
	wantErr(t, h.apply(&TaskSignal{TaskID: "r/approve", Payload: json.RawMessage(`"` + strings.Repeat("x", domain.DefaultLimits.MaxResultBytes) + `"`)}), ErrTooLarge)
	wantErr(t, h.apply(&RunSignal{RunID: "nope", Name: "go"}), ErrNotFound)
	wantErr(t, h.apply(&RunSignal{RunID: "r", Name: "bad name"}), ErrInvalidArgument)
}

func TestRunSignalCompletesEveryListener(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[
	 {"key":"w1","type":"wait","signal":"go"},
	 {"key":"w2","type":"wait","signal":"go"},
	 {"key":"other","type":"wait","signal":"stop"},
	 {"key":"bykey","type":"wait"},
	 {"key":"after","type":"t","deps":["w1","w2"]}]}`)
	res := h.ok(&RunSignal{RunID: "r", Name: "go", Payload: json.RawMessage(`"yes"`), SignalID: "g1"}).(*SignalResult)
	if !res.Accepted || strings.Join(res.Tasks, ",") != "w1,w2" {
		t.Fatalf("run signal: %+v", res)
	}
	again := h.ok(&RunSignal{RunID: "r", Name: "go", Payload: json.RawMessage(`"yes"`), SignalID: "g1"}).(*SignalResult)
	if !again.Accepted || strings.Join(again.Tasks, ",") != "w1,w2" {
		t.Fatalf("re-sent run signal: %+v", again)
	}
	if res := h.ok(&RunSignal{RunID: "r", Name: "go", SignalID: "g2"}).(*SignalResult); res.Accepted {
		t.Fatalf("nobody waits for go any more: %+v", res)
	}
	h.wantTasks("r", map[string]domain.TaskState{"other": domain.TaskReady, "bykey": domain.TaskReady})
	c := h.claimOne("w")
	if c.TaskKey != "after" || string(c.DepResults["w1"]) != `"yes"` || string(c.DepResults["w2"]) != `"yes"` {
		t.Fatalf("dependent %+v", c)
	}
	// A wait task without a signal name listens for its key.
	if res := h.ok(&RunSignal{RunID: "r", Name: "bykey"}).(*SignalResult); !res.Accepted {
		t.Fatalf("signal by key: %+v", res)
	}
	h.complete(c, `1`)
	h.ok(&RunSignal{RunID: "r", Name: "stop"})
	h.wantRun("r", domain.RunSucceeded)
	checkDerived(t, h.f)
}

func TestWaitTaskTimeoutRetriesByPolicy(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"approve","type":"wait","timeout_ms":1000,"retry":{"max_attempts":2,"initial_backoff_ms":100}},
		{"key":"ship","type":"t","deps":["approve"]}]}`)
	h.now += 1000
	h.ok(&Tick{})
	tk := h.task("r", "approve")
	if tk.State != domain.TaskRetrying || !strings.Contains(tk.Error, "no signal within timeout_ms 1000") {
		t.Fatalf("after the first wait %+v", tk)
	}
	if res := h.signal("r", "approve", `1`, ""); res.Accepted {
		t.Fatal("signal to a retrying wait task accepted")
	}
	h.now += 100
	h.ok(&Tick{})
	if tk := h.task("r", "approve"); tk.State != domain.TaskReady || tk.Attempt != 2 {
		t.Fatalf("waiting again %+v", tk)
	}
	h.now += 1000
	h.ok(&Tick{})
	h.wantTasks("r", map[string]domain.TaskState{"approve": domain.TaskFailed, "ship": domain.TaskCancelled})
	h.wantRun("r", domain.RunFailed)
	if wakeKeys(t, h.f) != 0 {
		t.Fatal("a timer outlived its task")
	}
	checkDerived(t, h.f)
}

// A cancelled run's waiting task is cancelled, and its timer goes.
func TestWaitTaskCancelled(t *testing.T) {
	h := newSem(t)
	h.submit("r", `{"tasks":[{"key":"approve","type":"wait","timeout_ms":1000}]}`)
	h.verb(MsgCancelRun, "r")
	h.wantTasks("r", map[string]domain.TaskState{"approve": domain.TaskCancelled})
	if wakeKeys(t, h.f) != 0 {
		t.Fatal("a timer outlived its task")
	}
	if res := h.signal("r", "approve", `1`, "x"); res.Accepted {
		t.Fatal("signal to a cancelled task accepted")
	}
	checkDerived(t, h.f)
}
