package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Why a run or task waits (run.get and task.get waiting_on): the state
// machine's holds (fsm.Holds, read from replicated state with this node's
// clock) turned into a sentence and the command that lifts each, plus the
// tasks whose type no live worker serves (waiting_for_worker). Nothing here
// is stored or proposed.

// holdReader is the state read waiting_on needs (fsm.FSM has it; handler
// fakes without it get no waiting_on).
type holdReader interface {
	Holds(r *fsm.Run, tasks []*fsm.Task, now int64) (*fsm.Hold, map[string]fsm.Hold, error)
}

// waitingOn fills out's and its tasks' waiting_on for run r read with tasks;
// noWorker lists the types waiting_for_worker flagged.
func (a *Agent) waitingOn(r *fsm.Run, tasks []*fsm.Task, noWorker []string, out *rpc.Run) {
	hr, ok := a.state.(holdReader)
	if !ok || r.State.Done() {
		return // a done run waits for nothing
	}
	now := max(a.state.Now(), time.Now().UnixMilli()) // as queue.list: the later of the FSM's clock and the wall's
	runHold, holds, err := hr.Holds(r, tasks, now)
	if err != nil {
		return // a hint only: run.get answers without it
	}
	if runHold != nil {
		out.WaitingOn = append(out.WaitingOn, explainHold(r.ID, *runHold))
	}
	for i := range out.Tasks {
		t := &out.Tasks[i]
		w, ok := rpc.WaitingOn{}, false
		if h, held := holds[t.Key]; held {
			w, ok = explainHold(r.ID, h), true
		} else if typ := readyType(t); typ != "" && slices.Contains(noWorker, typ) {
			w, ok = noWorkerReason(t.Queue, typ), true
		}
		if !ok {
			continue
		}
		t.WaitingOn = &w
		// Once per reason, queue and type: a fan-out of retrying tasks is
		// one line, not one per task.
		if !slices.ContainsFunc(out.WaitingOn, func(o rpc.WaitingOn) bool { return o.Reason == w.Reason && o.Queue == w.Queue && o.Type == w.Type }) {
			out.WaitingOn = append(out.WaitingOn, w)
		}
	}
}

// taskWaitingOn is task.get's waiting_on for t (out) of run.
func (a *Agent) taskWaitingOn(ctx context.Context, run string, t *fsm.Task, out *rpc.Task) {
	r, err := a.state.GetRunOnly(run)
	if err != nil || r.State.Done() {
		return
	}
	mine := []*fsm.Task{t}
	noWorker, _ := a.waitingForWorker(ctx, mine)
	rr := rpc.Run{Tasks: []rpc.Task{*out}}
	a.waitingOn(r, mine, noWorker, &rr)
	out.WaitingOn = rr.Tasks[0].WaitingOn
}

// readyType is the type a worker needs for t if t is dispatchable.
func readyType(t *rpc.Task) string {
	switch {
	case t.LeaseOwner != "":
		return ""
	case t.State == "ready" && !t.Waiting:
		return t.Type
	case t.Compensation != nil && t.Compensation.Phase == fsm.CompReady:
		return t.RevertType
	}
	return ""
}

// workerCommand is the command that starts a worker for typ in queue.
func workerCommand(queue, typ string) string {
	cmd := "flowd worker run --type " + typ
	if queue != "" && queue != "default" {
		cmd += " --queue " + queue
	}
	return cmd + " --exec CMD"
}

func noWorkerReason(queue, typ string) rpc.WaitingOn {
	return rpc.WaitingOn{Reason: "no_worker", Queue: queue, Type: typ,
		Message: fmt.Sprintf("no live worker claims type %s in queue %s (see `flowd worker list`)", typ, queue),
		Command: workerCommand(queue, typ)}
}

// explainHold says h in a sentence with the command that lifts it.
func explainHold(run string, h fsm.Hold) rpc.WaitingOn {
	w := rpc.WaitingOn{Reason: h.Reason, Queue: h.Queue, Type: h.Type, Until: ms(h.Until)}
	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
	switch h.Reason {
	case fsm.HoldStartAt:
		w.Message = "the run has a delayed start: it starts at " + at(h.Until) + " (to start it now, cancel it and submit it again without --delay)"
	case fsm.HoldAdmission:
		w.Message = fmt.Sprintf("admission: %d of %d runs are running (settings max_running_runs); the run starts when one ends, or raise the cap (0: none)", h.Count, h.Limit)
		w.Command = "flowd settings set --max-running-runs N"
	case fsm.HoldInterrupted:
		w.Message = "the run is interrupted"
		w.Command = "flowd run resume " + run
	case fsm.HoldRunPaused:
		w.Message = "queue " + h.Queue + " is paused for this run"
		w.Command = "flowd queue resume " + h.Queue + " --run " + run
	case fsm.HoldQueuePaused:
		w.Message = "queue " + h.Queue + " is paused"
		w.Command = "flowd queue resume " + h.Queue
	case fsm.HoldBreakerOpen:
		w.Message = fmt.Sprintf("the circuit breaker of type %s is open after %d consecutive failures; it lets one trial task through at %s (settings breaker_cooldown) and closes when that succeeds; turning breakers off (cluster-wide) lifts it now",
			h.Type, h.Failures, at(h.Until))
		w.Command = "flowd settings set --breaker-failures -1"
	case fsm.HoldBreakerTrial:
		w.Message = "the circuit breaker of type " + h.Type + " is half-open: it waits for its trial task " + h.Trial + " and closes when that succeeds; turning breakers off (cluster-wide) lifts it now"
		w.Command = "flowd settings set --breaker-failures -1"
	case fsm.HoldConcurrency:
		how := ""
		if h.Auto {
			how = ", adjusted by the leader (auto)"
		}
		w.Message = fmt.Sprintf("queue %s is at its concurrency cap: %d of %d running%s; a task starts when one ends, or raise the cap (0: none)", h.Queue, h.Count, h.Limit, how)
		w.Command = "flowd queue set " + h.Queue + " --concurrency N"
	case fsm.HoldRateLimit:
		of := "queue " + h.Queue + "'s rate limit"
		w.Command = "flowd queue set " + h.Queue + " --rate R"
		if h.TypeLimit {
			of = "the rate limit of type " + h.Type + " in queue " + h.Queue
			w.Command += " --type " + h.Type
		}
		w.Message = of + " (" + h.Rate + ") holds it; the next token comes at " + at(h.Until) + ", or raise the rate (0: no limit)"
	case fsm.HoldBackoff:
		w.Message = "a failed attempt's retry backoff: it becomes ready again at " + at(h.Until)
	default:
		w.Message = h.Reason
	}
	return w
}
