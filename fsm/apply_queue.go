package fsm

import (
	"fmt"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Queues, circuit breakers, settings, retention and grouped commands.

func (a *applier) breakersOn() bool { return a.getSettings().breakerFailures() > 0 }

// breakerAllows reports whether a task of type typ may be dispatched now.
func (a *applier) breakerAllows(typ string) bool {
	if !a.breakersOn() {
		return true
	}
	return a.breaker(typ).Allows(a.now, a.getSettings().breakerCooldown())
}

// breakerPick records that a task of typ was dispatched: a cooled-down open
// breaker half-opens and the task becomes its one trial.
func (a *applier) breakerPick(typ string, t *Task) {
	if !a.breakersOn() {
		return
	}
	b := a.breaker(typ)
	if b.State == BreakerOpen {
		a.breakerTo(b, BreakerHalfOpen, "half_open")
	}
	if b.State == BreakerHalfOpen {
		b.Trial = t.ID()
	}
}

func (a *applier) breakerTo(b *Breaker, to, transition string) {
	from := b.State
	b.State = to
	if to == BreakerOpen {
		b.OpenedAt = a.now
	}
	a.emit(Event{Kind: "breaker", Name: b.Type, Type: b.Type, Transition: transition, From: from, To: to})
}

func (a *applier) breakerSuccess(typ string) {
	b := a.storedBreaker(typ)
	if b == nil {
		return // a fresh breaker: closed, no failures, no trial
	}
	b.Failures, b.Trial = 0, ""
	if b.State != BreakerClosed {
		a.breakerTo(b, BreakerClosed, "close")
	}
}

func (a *applier) breakerFailure(typ string) {
	if !a.breakersOn() {
		return
	}
	b := a.breaker(typ)
	b.Failures++
	b.Trial = ""
	if b.State == BreakerHalfOpen || (b.State == BreakerClosed && b.Failures >= a.getSettings().breakerFailures()) {
		a.breakerTo(b, BreakerOpen, "open")
	}
}

// tickBreakers half-opens every open breaker whose cool-down has passed.
func (a *applier) tickBreakers() int {
	if !a.breakersOn() {
		return 0
	}
	var types []string
	must(a.tx.Scan(pfxBreaker, nil, false, func(k, _ []byte) bool {
		types = append(types, string(k[len(pfxBreaker):]))
		return true
	}))
	n := 0
	for _, typ := range types {
		b := a.breaker(typ)
		if b.State == BreakerOpen && a.now >= b.OpenedAt+a.getSettings().breakerCooldown() {
			a.breakerTo(b, BreakerHalfOpen, "half_open")
			n++
		}
	}
	return n
}

func validName(kind, name string) error {
	if !domain.ValidKey(name) || len(name) > domain.DefaultLimits.MaxKeyLen {
		return fmt.Errorf("%w: %s %q must be 1-%d letters, digits, '_', '.', ':' or '-'", ErrInvalidArgument, kind, name, domain.DefaultLimits.MaxKeyLen)
	}
	return nil
}

func (a *applier) applyQueueSet(c *QueueSet) any {
	if err := validName("queue", c.Name); err != nil {
		return err
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("%w: concurrency %d must be >= 0 (0 = unlimited)", ErrInvalidArgument, c.Concurrency)
	}
	q := a.queue(c.Name)
	if q.Concurrency == c.Concurrency && q.Auto == nil {
		return &ChangedResult{}
	}
	from := itoa(q.Concurrency)
	if q.Auto != nil { // a number turns auto concurrency off
		from = autoString(q.Auto) + " cap " + from
		q.Auto = nil
	}
	q.Concurrency = c.Concurrency
	a.emit(Event{Kind: "queue", Name: c.Name, Queue: c.Name, Transition: "set_concurrency",
		From: from, To: itoa(c.Concurrency)})
	return &ChangedResult{Changed: true}
}

func (a *applier) applyQueueDelete(c *QueueDelete) any {
	if err := validName("queue", c.Name); err != nil {
		return err
	}
	key := queueKey(c.Name)
	q := load[QueueState](a, &a.queues, key)
	switch {
	case q == nil:
		return fmt.Errorf("%w: no queue %q; list them with `flowd queue list`", ErrNotFound, c.Name)
	case q.Ready > 0 || q.Running > 0:
		return fmt.Errorf("%w: queue %q holds %d ready and %d running tasks; it can be deleted once they are done", ErrIllegalTransition, c.Name, q.Ready, q.Running)
	case len(q.PausedRuns) > 0:
		return fmt.Errorf("%w: queue %q is paused for %d runs; resume it for them first (flowd queue resume %s --run ID)", ErrIllegalTransition, c.Name, len(q.PausedRuns), c.Name)
	}
	e, _ := a.queues.get(key)
	e.deleted = true
	a.queueNamesOK = false
	a.emit(Event{Kind: "queue", Name: c.Name, Queue: c.Name, Transition: "delete"})
	return &ChangedResult{Changed: true}
}

func (a *applier) applyQueuePause(c *QueuePause) any {
	if err := validName("queue", c.Name); err != nil {
		return err
	}
	transition := "resume"
	if c.Paused {
		transition = "pause"
	}
	if c.RunID == "" {
		q := a.queue(c.Name)
		if q.Paused == c.Paused {
			return &ChangedResult{}
		}
		q.Paused = c.Paused
		a.emit(Event{Kind: "queue", Name: c.Name, Queue: c.Name, Transition: transition})
		return &ChangedResult{Changed: true}
	}
	r := a.loadRun(c.RunID)
	if r == nil {
		return fmt.Errorf("%w: run %s", ErrNotFound, c.RunID)
	}
	if slices.Contains(r.PausedQueues, c.Name) == c.Paused {
		return &ChangedResult{}
	}
	q := a.queue(c.Name)
	if c.Paused {
		q.PausedRuns = append(q.PausedRuns, r.ID)
		r.PausedQueues = append(r.PausedQueues, c.Name)
		slices.Sort(r.PausedQueues)
		for _, t := range a.runTasks(r.ID) {
			if t.Queue == c.Name {
				a.unindexTask(t)
			}
		}
	} else {
		q.PausedRuns = slices.DeleteFunc(q.PausedRuns, func(s string) bool { return s == r.ID })
		if len(q.PausedRuns) == 0 {
			q.PausedRuns = nil
		}
		r.PausedQueues = slices.DeleteFunc(r.PausedQueues, func(s string) bool { return s == c.Name })
		if len(r.PausedQueues) == 0 {
			r.PausedQueues = nil
		}
		a.reindex(r)
	}
	a.emit(Event{Kind: "queue", Name: c.Name, Queue: c.Name, RunID: r.ID, Transition: transition})
	return &ChangedResult{Changed: true}
}

func (a *applier) applySettingsSet(c *SettingsSet) any {
	s := a.getSettings()
	switch {
	case c.MaxRunningRuns != nil && *c.MaxRunningRuns < 0:
		return fmt.Errorf("%w: max_running_runs must be >= 0 (0 = unlimited)", ErrInvalidArgument)
	case c.RetentionMS != nil && *c.RetentionMS < 0:
		return fmt.Errorf("%w: retention_ms must be >= 0 (0 = default 7 days)", ErrInvalidArgument)
	case c.BreakerCooldownMS != nil && *c.BreakerCooldownMS < 0:
		return fmt.Errorf("%w: breaker_cooldown_ms must be >= 0 (0 = default 30 s)", ErrInvalidArgument)
	case c.EventWindow != nil && (*c.EventWindow < 0 || (*c.EventWindow > 0 && *c.EventWindow < 100)):
		return fmt.Errorf("%w: event_window must be 0 (default) or at least 100", ErrInvalidArgument)
	case c.DefaultMaxAttempts != nil && (*c.DefaultMaxAttempts < 0 || *c.DefaultMaxAttempts > a.limits.MaxAttempts):
		return fmt.Errorf("%w: default_max_attempts must be 0 (the default, 1) to %d", ErrInvalidArgument, a.limits.MaxAttempts)
	}
	if c.MaxRunningRuns != nil {
		s.MaxRunningRuns = *c.MaxRunningRuns
	}
	if c.RetentionMS != nil {
		s.RetentionMS = *c.RetentionMS
	}
	if c.BreakerFailures != nil {
		s.BreakerFailures = *c.BreakerFailures
	}
	if c.BreakerCooldownMS != nil {
		s.BreakerCooldownMS = *c.BreakerCooldownMS
	}
	if c.EventWindow != nil {
		s.EventWindow = *c.EventWindow
	}
	if c.DefaultMaxAttempts != nil {
		s.DefaultMaxAttempts = *c.DefaultMaxAttempts
	}
	a.settingsDirty = true
	a.emit(Event{Kind: "settings", Transition: "set"})
	a.admitPending()
	out := *s
	return &out
}

func (a *applier) applyGC(c *GC) any {
	limit := c.Limit
	if limit <= 0 {
		limit = 200
	}
	cutoff := a.now - a.getSettings().retention()
	var keys [][]byte
	more := false
	must(a.tx.Scan(pfxFinished, nil, false, func(k, _ []byte) bool {
		if int64(getU64(k[len(pfxFinished):len(pfxFinished)+8])^(1<<63)) > cutoff {
			return false
		}
		if len(keys) == limit {
			more = true
			return false
		}
		keys = append(keys, slices.Clone(k))
		return true
	}))
	n := 0
	for _, k := range keys {
		id := string(k[len(pfxFinished)+8:])
		r := a.loadRun(id)
		if r == nil || !r.State.Done() {
			a.del(k)
			continue
		}
		if r.Counts[domain.TaskRunning] > 0 || r.Counts[domain.TaskReverting] > 0 {
			// A failed run whose last tasks still run: keep it until they
			// report, so their workers get accepted:false, not not_found.
			continue
		}
		a.deleteRun(r)
		n++
	}
	return &CountResult{Count: n, More: more}
}

// deleteRun removes a finished run, its tasks and every index entry.
func (a *applier) deleteRun(r *Run) {
	tasks := a.runTasks(r.ID)
	a.deleteRunLogs(r.ID, tasks)
	for _, t := range tasks {
		a.unindexTask(t)
		if t.Leased() {
			a.endLease(t, OutcomeCancelled, "run deleted by retention")
		}
		a.unwake(t)
		a.deleteRecord(&a.taskCache, taskKey(t.RunID, t.Key))
	}
	for _, qn := range r.PausedQueues {
		q := a.queue(qn)
		q.PausedRuns = slices.DeleteFunc(q.PausedRuns, func(s string) bool { return s == r.ID })
		if len(q.PausedRuns) == 0 {
			q.PausedRuns = nil
		}
	}
	a.del(runStateKey(string(r.State), r.ID))
	if r.FinishedAt != 0 {
		a.del(finishedKey(r.FinishedAt, r.ID))
	}
	a.unindexLabels(r)
	if a.rulesFor(r.ID) != nil {
		a.del(rulesKey(r.ID))
		a.countRulesRun(-1)
	}
	a.deleteRecord(&a.runs, runKey(r.ID))
	a.del(specKey(r.ID))
	// Not an edge of the run machine (the run leaves the state entirely),
	// so the event carries no From.
	a.emit(Event{Kind: "run", RunID: r.ID, Transition: "deleted", To: "", Error: "removed by retention (was " + string(r.State) + ")"})
}

// sharable reports whether cmd's handler returns every error before its
// first change, so it needs no write buffer of its own inside a Multi.
func sharable(cmd Command) bool {
	switch c := cmd.(type) {
	case *Heartbeat, *Fail:
		return true
	case *Complete:
		return len(c.Spawn) == 0 && c.Claim == nil
	}
	return false
}

func (a *applier) applyMulti(c *Multi) any {
	tx, ok := a.tx.(*store.Overlay)
	if !ok || !tx.Journaling() {
		return fmt.Errorf("%w: multi needs a journaled transaction", ErrBadCommand)
	}
	out := &MultiResult{Results: make([]any, len(c.Cmds))}
	for i, raw := range c.Cmds {
		cmd, err := Decode(raw)
		if err == nil && cmd.Type() == MsgMulti {
			err = fmt.Errorf("%w: nested multi", ErrBadCommand)
		}
		if err == nil && cmd.Type() == MsgSetVersion {
			// A node that cannot apply the version must stop before the
			// entry (ApplyBatch), which it can only see at the top level.
			err = fmt.Errorf("%w: set_version inside a multi", ErrBadCommand)
		}
		if err != nil {
			out.Results[i] = err
			continue
		}
		if sharable(cmd) {
			// Fails, if at all, before changing anything: apply it sharing
			// the entry's record caches (one decode and one write of the
			// queue, run and counters per entry).
			out.Results[i] = a.dispatch(cmd)
			continue
		}
		// Anything else may fail after changing records: write the caches
		// out, mark the journal, and undo back to the mark on failure.
		a.flush()
		sp, nev, seq, evSeq := tx.Mark(), len(a.events), a.seq, a.evSeq
		res := a.safeDispatch(cmd)
		out.Results[i] = res
		if _, isErr := res.(error); isErr {
			tx.RollbackTo(sp)
			a.discard()
			a.events, a.seq, a.evSeq = a.events[:nev], seq, evSeq
		}
	}
	return out
}
