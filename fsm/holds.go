package fsm

import (
	"slices"

	"github.com/flowd/flowd/fsm/domain"
)

// Why a task is not running: holds, computed when read from the replicated
// state (never stored, never part of Apply). Each names the first thing a
// claim would stop at for the task, in the order the dispatcher checks
// (dispatch.go nextReady): the run, a pause for the run, a queue pause, the
// type's breaker, the queue's cap, a rate limit. A ready task with none of
// these waits for a worker (the daemon tells whether one serves its type)
// or only for its turn.

// Hold reasons.
const (
	HoldStartAt      = "start_at"        // the run's delayed start has not come
	HoldAdmission    = "admission"       // settings max_running_runs is reached
	HoldInterrupted  = "run_interrupted" // the run is interrupted
	HoldRunPaused    = "run_paused"      // the task's queue is paused for its run
	HoldQueuePaused  = "queue_paused"    // the task's queue is paused
	HoldBreakerOpen  = "breaker_open"    // its type's circuit breaker is open
	HoldBreakerTrial = "breaker_trial"   // half-open: one trial task is out
	HoldConcurrency  = "concurrency"     // the queue's cap is reached
	HoldRateLimit    = "rate_limit"      // the queue's (or type's) bucket is empty
	HoldBackoff      = "retry_backoff"   // a failed attempt's backoff
)

// Hold says why a task (or a run) is not running now.
type Hold struct {
	Reason string
	Queue  string
	Type   string
	// Until is when the hold lifts by itself (ms; 0: only an operator
	// lifts it, or it lifts when something else ends).
	Until int64
	// Limit and Count: the cap and what is running against it
	// (concurrency, admission); Failures: the breaker's count.
	Limit, Count, Failures int
	// Auto: the queue's cap is adjusted by the leader; TypeLimit: Rate is
	// the limit of the task type within the queue.
	Auto, TypeLimit bool
	// Rate: the limit that holds it ("2/s burst 1"); Trial: the task id
	// a half-open breaker waits for.
	Rate, Trial string
}

// Holds answers why run r (as read with tasks) is not making progress:
// the run's own hold (nil if none) and a hold per task key for the tasks
// that could run but do not. now is the reader's clock (ms).
func (f *FSM) Holds(r *Run, tasks []*Task, now int64) (*Hold, map[string]Hold, error) {
	var runHold *Hold
	holds := map[string]Hold{}
	err := f.View(func(rd Reader) error {
		s, err := getJSON[Settings](rd, keySettings)
		if err != nil {
			return err
		}
		if s == nil {
			s = &Settings{}
		}
		switch r.State {
		case domain.RunPending:
			if r.StartAt > now {
				runHold = &Hold{Reason: HoldStartAt, Until: r.StartAt}
				break
			}
			c, err := getJSON[Counters](rd, keyCounters)
			if err != nil {
				return err
			}
			h := &Hold{Reason: HoldAdmission, Limit: s.MaxRunningRuns}
			if c != nil {
				h.Count = c.ActiveRuns
			}
			if s.MaxRunningRuns > 0 {
				runHold = h
			}
		case domain.RunInterrupted:
			runHold = &Hold{Reason: HoldInterrupted}
		}
		queues := map[string]*QueueState{}
		queueOf := func(name string) (*QueueState, error) {
			if q, ok := queues[name]; ok {
				return q, nil
			}
			q, err := getJSON[QueueState](rd, queueKey(name))
			queues[name] = q
			return q, err
		}
		for _, t := range tasks {
			switch {
			case t.State == domain.TaskRetrying && t.RetryAt > 0:
				holds[t.Key] = Hold{Reason: HoldBackoff, Queue: t.Queue, Type: t.Type, Until: t.RetryAt}
				continue
			case runHold != nil && t.State == domain.TaskPending && len(t.Deps) == 0 && r.State == domain.RunPending:
				holds[t.Key] = *runHold // a root: it becomes ready when the run starts
				continue
			case t.LeaseOwner != "":
				continue
			case t.State == domain.TaskReady, t.State == domain.TaskReverting && t.Comp != nil && t.Comp.Phase == CompReady:
			default:
				continue
			}
			typ := dispatchType(t)
			h := Hold{Queue: t.Queue, Type: typ}
			if runHold != nil && r.State == domain.RunInterrupted {
				holds[t.Key] = *runHold
				continue
			}
			if slices.Contains(r.PausedQueues, t.Queue) {
				h.Reason = HoldRunPaused
				holds[t.Key] = h
				continue
			}
			if !t.Indexed {
				continue // not for a worker (a wait, a sleep, a loop or a child run)
			}
			q, err := queueOf(t.Queue)
			if err != nil {
				return err
			}
			if q == nil {
				continue
			}
			if hold(q, typ, rd, s, now, &h) {
				holds[t.Key] = h
			}
		}
		return nil
	})
	return runHold, holds, err
}

// hold fills h with what keeps a ready task of typ in q from being claimed
// at now, in the dispatcher's order; false if nothing does.
func hold(q *QueueState, typ string, rd Reader, s *Settings, now int64, h *Hold) bool {
	if q.Paused {
		h.Reason = HoldQueuePaused
		return true
	}
	if s.breakerFailures() > 0 {
		if b, _ := getJSON[Breaker](rd, breakerKey(typ)); b != nil && !b.Allows(now, s.breakerCooldown()) {
			h.Failures = b.Failures
			if b.State == BreakerOpen {
				h.Reason, h.Until = HoldBreakerOpen, b.OpenedAt+s.breakerCooldown()
			} else {
				h.Reason, h.Trial = HoldBreakerTrial, b.Trial
			}
			return true
		}
	}
	if q.Concurrency > 0 && q.Running >= q.Concurrency {
		h.Reason, h.Limit, h.Count, h.Auto = HoldConcurrency, q.Concurrency, q.Running, q.Auto != nil
		return true
	}
	if q.tokens(typ, now) == 0 {
		h.Reason, h.Until = HoldRateLimit, now
		if q.Limit != nil && q.Limit.Available(now) == 0 {
			h.Until, h.Rate = q.Limit.NextAt(now), limitString(q.Limit)
		}
		if tl := q.TypeLimits[typ]; tl != nil && tl.Available(now) == 0 {
			if at := tl.NextAt(now); at >= h.Until {
				h.Until, h.Rate, h.TypeLimit = at, limitString(tl), true
			}
		}
		return true
	}
	return false
}
