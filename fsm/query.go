package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Reads. Every method takes one point-in-time view of the store, so a read
// never sees half of an applied batch. Safe for concurrent use with Apply.

// View runs fn against a consistent read view.
func (f *FSM) View(fn func(r Reader) error) error {
	r, release, err := f.store.View()
	if err != nil {
		return err
	}
	defer release()
	return fn(r)
}

// Now returns the FSM clock (the largest leader stamp applied).
func (f *FSM) Now() int64 { return f.now.Load() }

// GetRun returns a run and its tasks in display order.
func (f *FSM) GetRun(id string) (*Run, []*Task, error) {
	var run *Run
	var tasks []*Task
	err := f.View(func(r Reader) error {
		var err error
		if run, err = getJSON[Run](r, runKey(id)); err != nil {
			return err
		}
		if run == nil {
			return fmt.Errorf("%w: run %s", ErrNotFound, id)
		}
		tasks, err = readTasks(r, id)
		return err
	})
	return run, tasks, err
}

// GetRunOnly returns a run without its tasks.
func (f *FSM) GetRunOnly(id string) (*Run, error) {
	var run *Run
	err := f.View(func(r Reader) error {
		var err error
		run, err = getJSON[Run](r, runKey(id))
		if err == nil && run == nil {
			err = fmt.Errorf("%w: run %s", ErrNotFound, id)
		}
		return err
	})
	return run, err
}

func readTasks(r Reader, runID string) ([]*Task, error) {
	var out []*Task
	var derr error
	err := r.Scan(taskPrefix(runID), nil, false, func(_, v []byte) bool {
		var t Task
		if derr = unmarshal(v, &t); derr != nil {
			return false
		}
		out = append(out, &t)
		return true
	})
	if err == nil {
		err = derr
	}
	sortTasks(out)
	return out, err
}

// GetTask returns one task by its protocol id "<run>/<key>".
func (f *FSM) GetTask(id string) (*Task, error) {
	run, key, ok := splitTaskID(id)
	if !ok {
		return nil, fmt.Errorf("%w: task id %q must look like <run id>/<task key>", ErrInvalidArgument, id)
	}
	var t *Task
	err := f.View(func(r Reader) error {
		var err error
		t, err = getJSON[Task](r, taskKey(run, key))
		if err == nil && t == nil {
			err = fmt.Errorf("%w: task %s", ErrNotFound, id)
		}
		return err
	})
	return t, err
}

// ErrAmbiguous: a short id matches several runs.
var ErrAmbiguous = fmt.Errorf("%w: ambiguous id", ErrInvalidArgument)

// ResolveRunID turns a full id, or any unique prefix or substring of one,
// into the full id.
func (f *FSM) ResolveRunID(short string) (string, error) {
	short = strings.ToLower(strings.TrimSpace(short))
	if short == "" {
		return "", fmt.Errorf("%w: empty run id", ErrInvalidArgument)
	}
	var matches []string
	n, part := 0, []byte(short)
	err := f.View(func(r Reader) error {
		if _, ok, err := r.Get(runKey(short)); err != nil || ok {
			if ok {
				matches = []string{short}
			}
			return err
		}
		// Every match is counted (the error says how many), but only the
		// first few ids are kept for the message. A unique part scans
		// every run anyway, so counting costs no more than that.
		return r.Scan(pfxRun, nil, false, func(k, _ []byte) bool {
			id := k[len(pfxRun):]
			if bytes.Contains(id, part) {
				if n++; len(matches) < 3 {
					matches = append(matches, string(id))
				}
			}
			return true
		})
	})
	if n == 0 {
		n = len(matches) // the exact id
	}
	switch {
	case err != nil:
		return "", err
	case n == 0:
		return "", fmt.Errorf("%w: no run matches %q", ErrNotFound, short)
	case n > 1:
		return "", fmt.Errorf("%w: %q matches %d runs (%s…); give more characters", ErrAmbiguous, short, n, strings.Join(matches, ", "))
	}
	return matches[0], nil
}

// ListRuns lists runs newest first, optionally of one state, resuming after
// cursor (the last id of the previous page).
func (f *FSM) ListRuns(state domain.RunState, limit int, cursor string) ([]*Run, string, error) {
	return f.ListRunsWhere(state, RunFilter{}, limit, cursor)
}

// RunFilter selects runs by what their records say; the zero value takes
// every run.
type RunFilter struct {
	Labels map[string]string // every pair must match
	// Selector: every term must hold too (ANDed with Labels).
	Selector      domain.Selector
	Workflow      string // the spec's name
	CreatedAfter  int64  // ms, exclusive; 0: no bound
	CreatedBefore int64  // ms, exclusive; 0: no bound
	// Definition (and DefinitionVersion, 0: any) the run was submitted by.
	Definition        string
	DefinitionVersion int
}

func (q RunFilter) empty() bool {
	return len(q.Labels) == 0 && len(q.Selector) == 0 && q.Workflow == "" && q.CreatedAfter == 0 && q.CreatedBefore == 0 &&
		q.Definition == "" && q.DefinitionVersion == 0
}

func (q RunFilter) match(r *Run) bool {
	if q.Workflow != "" && r.Workflow != q.Workflow {
		return false
	}
	if q.Definition != "" && r.Definition != q.Definition || q.DefinitionVersion != 0 && r.DefinitionVersion != q.DefinitionVersion {
		return false
	}
	if q.CreatedAfter != 0 && r.CreatedAt <= q.CreatedAfter || q.CreatedBefore != 0 && r.CreatedAt >= q.CreatedBefore {
		return false
	}
	for k, v := range q.Labels {
		if got, ok := r.Labels[k]; !ok || got != v {
			return false
		}
	}
	return q.Selector.Matches(r.Labels)
}

// indexable reports whether the label index can narrow q: it has a label
// pair, or a selector term that the index serves (k=v, k); the others
// (k!=v, !k) are checked on each run read.
func (q RunFilter) indexable() bool {
	if len(q.Labels) > 0 {
		return true
	}
	for _, t := range q.Selector {
		if t.Op == domain.SelEquals || t.Op == domain.SelExists {
			return true
		}
	}
	return false
}

// MaxListScan bounds the run records one filtered list page examines: a
// page with fewer matches than asked for (and a next cursor) means "keep
// paging", so a selective filter over many runs costs bounded work per call.
const MaxListScan = 10_000

// maxListScan is MaxListScan, lowered by tests.
var maxListScan = MaxListScan

// ListRunsWhere lists runs newest first (run ids are UUIDv7), optionally
// of one state, that match q, from after cursor (a run id) on. A filter
// with labels or selector terms the index serves walks the label index
// (listByLabels) once the store has it built, any other the runs
// (listByScan); both answer the same.
func (f *FSM) ListRunsWhere(state domain.RunState, q RunFilter, limit int, cursor string) ([]*Run, string, error) {
	return f.listRuns(state, q, limit, cursor, q.indexable())
}

func (f *FSM) listRuns(state domain.RunState, q RunFilter, limit int, cursor string, byLabels bool) ([]*Run, string, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var out []*Run
	next := ""
	err := f.View(func(r Reader) error {
		var err error
		if byLabels && labelIndexReady(r) {
			out, next, err = listByLabels(r, state, q, limit, cursor, out)
		} else {
			out, next, err = listByScan(r, state, q, limit, cursor, out)
		}
		return err
	})
	return out, next, err
}

// listByScan examines the runs (of state, when given) newest first from
// after cursor, decoding each, until it has limit matches or has examined
// maxListScan.
func listByScan(r Reader, state domain.RunState, q RunFilter, limit int, cursor string, out []*Run) ([]*Run, string, error) {
	next := ""
	pfx := pfxRun
	if state != "" {
		pfx = runStatePrefix(string(state))
	}
	var start []byte
	if cursor != "" {
		start = cat(pfx, []byte(cursor))
	}
	examined, lastID := 0, ""
	var bad error
	if err := r.Scan(pfx, start, true, func(k, v []byte) bool {
		id := string(k[len(pfx):])
		if id == cursor {
			return true
		}
		if len(out) == limit || examined == maxListScan {
			// More may follow: from after the last run returned, or,
			// when the scan bound came first, after the last examined.
			next = lastID
			if len(out) == limit {
				next = out[len(out)-1].ID
			}
			return false
		}
		examined, lastID = examined+1, id
		var run *Run
		var err error
		if state == "" { // scanning the records themselves
			run = new(Run)
			if err = unmarshal(v, run); err != nil {
				err = fmt.Errorf("decode run %s: %w", id, err)
			}
		} else {
			run, err = getJSON[Run](r, runKey(id))
		}
		if err != nil {
			bad = err
			return false
		}
		if run != nil && (q.empty() || q.match(run)) {
			out = append(out, run)
		}
		return true
	}); err != nil {
		return out, "", err
	}
	return out, next, bad
}

// CountRuns counts runs per state.
func (f *FSM) CountRuns() (map[domain.RunState]int, error) {
	out := map[domain.RunState]int{}
	err := f.View(func(r Reader) error {
		return r.Scan(pfxRunState, nil, false, func(k, _ []byte) bool {
			rest := k[len(pfxRunState):]
			if i := bytes.IndexByte(rest, '/'); i > 0 {
				out[domain.RunState(rest[:i])]++
			}
			return true
		})
	})
	return out, err
}

// QueueInfo is a queue with its breakers and oldest ready task.
type QueueInfo struct {
	QueueState
	OldestReadyAt int64     `json:"oldest_ready_at,omitempty"`
	Breakers      []Breaker `json:"breakers,omitempty"`
	// PausedReady counts the ready tasks a pause for their run holds back
	// (they are not in the ready index, so Ready does not count them).
	PausedReady int `json:"paused_ready,omitempty"`
}

// Queues lists every queue with counts, config, oldest ready task and the
// breakers of the types it holds.
func (f *FSM) Queues() ([]QueueInfo, error) {
	var out []QueueInfo
	err := f.View(func(r Reader) error {
		var qs []QueueState
		var derr error
		if err := r.Scan(pfxQueue, nil, false, func(_, v []byte) bool {
			var q QueueState
			derr = unmarshal(v, &q)
			qs = append(qs, q)
			return derr == nil
		}); err != nil || derr != nil {
			return firstErr(err, derr)
		}
		breakers, err := readBreakers(r)
		if err != nil {
			return err
		}
		for _, q := range qs {
			info := QueueInfo{QueueState: q}
			for _, run := range q.PausedRuns {
				tasks, err := readTasks(r, run)
				if err != nil {
					return err
				}
				for _, t := range tasks {
					if t.Queue == q.Name && t.LeaseOwner == "" && (t.State == domain.TaskReady && t.Type != domain.TypeWait ||
						t.State == domain.TaskReverting && t.Comp != nil && t.Comp.Phase == CompReady) {
						info.PausedReady++
					}
				}
			}
			types := map[string]bool{}
			for typ := range q.Types {
				types[typ] = true
			}
			for _, b := range breakers {
				if types[b.Type] {
					info.Breakers = append(info.Breakers, b)
				}
			}
			// Oldest ready: the smallest ReadyAt over each type's FIFO head
			// (heads are oldest within a priority; good enough as an age).
			for typ := range q.Types {
				pfx := readyPrefix(q.Name, typ)
				_ = r.Scan(pfx, nil, false, func(k, _ []byte) bool {
					id := string(k[len(pfx)+12:])
					run, key, _ := splitTaskID(id)
					if t, _ := getJSON[Task](r, taskKey(run, key)); t != nil {
						if info.OldestReadyAt == 0 || t.ReadyAt < info.OldestReadyAt {
							info.OldestReadyAt = t.ReadyAt
						}
					}
					return false
				})
			}
			out = append(out, info)
		}
		return nil
	})
	return out, err
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func readBreakers(r Reader) ([]Breaker, error) {
	var out []Breaker
	var derr error
	err := r.Scan(pfxBreaker, nil, false, func(_, v []byte) bool {
		var b Breaker
		derr = unmarshal(v, &b)
		out = append(out, b)
		return derr == nil
	})
	return out, firstErr(err, derr)
}

// Breakers lists the circuit breakers that have ever changed.
func (f *FSM) Breakers() ([]Breaker, error) {
	var out []Breaker
	err := f.View(func(r Reader) error {
		var err error
		out, err = readBreakers(r)
		return err
	})
	return out, err
}

// Settings returns the replicated settings.
func (f *FSM) Settings() (Settings, error) {
	var s Settings
	err := f.View(func(r Reader) error {
		v, err := getJSON[Settings](r, keySettings)
		if v != nil {
			s = *v
		}
		return err
	})
	return s, err
}

// Counters returns the replicated running totals.
func (f *FSM) Counters() (Counters, error) {
	var c Counters
	err := f.View(func(r Reader) error {
		v, err := getJSON[Counters](r, keyCounters)
		if v != nil {
			c = *v
		}
		return err
	})
	return c, err
}

// ErrEventsTrimmed: the requested index is older than the retained window.
var ErrEventsTrimmed = fmt.Errorf("%w: events trimmed", ErrNotFound)

// Events returns up to limit events with index >= from (optionally of one
// run), and the oldest index whose events are all retained. When from is
// older than that (events were trimmed), it returns ErrEventsTrimmed.
func (f *FSM) Events(from uint64, runID string, limit int) ([]Event, uint64, error) {
	var out []Event
	var oldest uint64
	err := f.View(func(r Reader) error {
		c, err := getJSON[Counters](r, keyCounters)
		if err != nil {
			return err
		}
		if c != nil && c.TrimmedThrough > 0 {
			oldest = c.TrimmedThrough + 1
		} else {
			_ = r.Scan(pfxEvent, nil, false, func(k, _ []byte) bool {
				oldest = getU64(k[len(pfxEvent) : len(pfxEvent)+8])
				return false
			})
		}
		if c != nil && from > 0 && from <= c.TrimmedThrough {
			return fmt.Errorf("%w: index %d is older than the retained window; resume from index %d or later",
				ErrEventsTrimmed, from, oldest)
		}
		start := eventsFrom(from)
		if from == 0 && c != nil && c.TrimmedThrough > 0 {
			start = eventsFrom(oldest)
		}
		var derr error
		err = r.Scan(pfxEvent, start, false, func(_, v []byte) bool {
			var evs []Event
			if derr = unmarshal(v, &evs); derr != nil {
				return false
			}
			for _, ev := range evs {
				if runID == "" || ev.RunID == runID {
					out = append(out, ev)
					if limit > 0 && len(out) == limit {
						return false
					}
				}
			}
			return true
		})
		return firstErr(err, derr)
	})
	return out, oldest, err
}

// LatestEvents returns the newest limit events (optionally of one run), in
// order.
func (f *FSM) LatestEvents(runID string, limit int) ([]Event, error) {
	var out []Event
	err := f.View(func(r Reader) error {
		var derr error
		err := r.Scan(pfxEvent, nil, true, func(_, v []byte) bool {
			var evs []Event
			if derr = unmarshal(v, &evs); derr != nil {
				return false
			}
			for i := len(evs) - 1; i >= 0; i-- {
				if runID == "" || evs[i].RunID == runID {
					out = append(out, evs[i])
					if len(out) == limit {
						return false
					}
				}
			}
			return true
		})
		return firstErr(err, derr)
	})
	slices.Reverse(out)
	return out, err
}

// Digest hashes every key and value of the state, in key order, with the
// applied index it describes. Two replicas at the same applied index have
// the same digest, or they diverged.
func (f *FSM) Digest() (string, uint64, error) {
	var d string
	var idx uint64
	err := f.View(func(r Reader) (err error) {
		d, idx, err = digestOf(r) // the digest check hashes the same way
		return err
	})
	return d, idx, err
}

// Deadlines says when the leader's loops next have work: the earliest lease
// expiry, the earliest retry or compensation wake-up, and the earliest open
// breaker cool-down end (0 = none).
type Deadlines struct {
	Lease, Wake, Breaker int64
	// Now is the FSM clock in the same view.
	Now int64
}

// NextDeadlines reads the earliest deadlines from the indexes.
func (f *FSM) NextDeadlines() (Deadlines, error) {
	var d Deadlines
	err := f.View(func(r Reader) error {
		first := func(pfx []byte) int64 {
			var at int64
			_ = r.Scan(pfx, nil, false, func(k, _ []byte) bool {
				at = int64(getU64(k[len(pfx):len(pfx)+8]) ^ (1 << 63))
				return false
			})
			return at
		}
		d.Lease, d.Wake = first(pfxLease), first(pfxWake)
		if v, _, err := r.Get(keyNow); err == nil {
			d.Now = int64(getU64(v))
		}
		s, _ := getJSON[Settings](r, keySettings)
		if s == nil {
			s = &Settings{}
		}
		bs, err := readBreakers(r)
		for _, b := range bs {
			if b.State == BreakerOpen {
				at := b.OpenedAt + s.breakerCooldown()
				if d.Breaker == 0 || at < d.Breaker {
					d.Breaker = at
				}
			}
		}
		return err
	})
	return d, err
}

// HasReady reports whether a claim by w could get a task at time now (ms):
// some queue it serves is not paused or full and has a dispatchable task of
// a type it handles whose breaker lets it through. The claim entry decides
// for real; this only keeps the dispatcher from proposing empty claims.
func (f *FSM) HasReady(w Waiter, now int64) bool { return f.ReadyCount(w, now, 1) > 0 }

// ReadyCount is HasReady counting: the dispatchable tasks w could get, up
// to limit (the dispatcher proposes a claim for no more waiters than that).
// MayHaveReady reports whether any task may be in the ready index, from the
// in-memory mirror when the store keeps one (no view taken): false is
// certain as of the last commit. The dispatcher asks it before counting
// ready work for its waiters after every commit.
func (f *FSM) MayHaveReady() bool {
	if p, ok := f.store.(store.PrefixProber); ok {
		return p.MayHavePrefix(pfxReady)
	}
	return true
}

func (f *FSM) ReadyCount(w Waiter, now int64, limit int) int {
	count := 0
	_ = f.View(func(r Reader) error {
		s, _ := getJSON[Settings](r, keySettings)
		if s == nil {
			s = &Settings{}
		}
		allows := func(typ string) bool {
			if s.breakerFailures() <= 0 {
				return true
			}
			b, _ := getJSON[Breaker](r, breakerKey(typ))
			return b == nil || b.Allows(now, s.breakerCooldown())
		}
		queues := w.Queues
		if len(queues) == 0 {
			_ = r.Scan(pfxQueue, nil, false, func(k, _ []byte) bool {
				queues = append(queues, string(k[len(pfxQueue):]))
				return true
			})
		}
		for _, qn := range queues {
			q, _ := getJSON[QueueState](r, queueKey(qn))
			if !q.Dispatching() {
				continue
			}
			// Rate limits: no more than the buckets' tokens at now, so an
			// empty bucket proposes no claim (ThrottledUntil says when).
			inQueue, qTokens := 0, q.Limit.Available(now)
			for typ, n := range q.Types { // a sum: order does not matter
				if n > 0 && (len(w.Types) == 0 || slices.Contains(w.Types, typ)) && allows(typ) {
					inQueue += min(n, q.tokens(typ, now))
				}
			}
			if count += min(inQueue, qTokens); count >= limit {
				return nil
			}
		}
		return nil
	})
	return min(count, limit)
}

// RunIDs lists every run id (tests and tooling).
func (f *FSM) RunIDs() []string {
	var ids []string
	_ = f.View(func(r Reader) error {
		return r.Scan(pfxRun, nil, false, func(k, _ []byte) bool {
			ids = append(ids, string(k[len(pfxRun):]))
			return true
		})
	})
	slices.Sort(ids)
	return ids
}

// GCDue reports whether some finished run is older than the retention
// period at time now (ms).
func (f *FSM) GCDue(now int64) bool {
	due := false
	_ = f.View(func(r Reader) error {
		s, _ := getJSON[Settings](r, keySettings)
		if s == nil {
			s = &Settings{}
		}
		return r.Scan(pfxFinished, nil, false, func(k, _ []byte) bool {
			at := int64(getU64(k[len(pfxFinished):len(pfxFinished)+8]) ^ (1 << 63))
			due = at <= now-s.retention()
			return false
		})
	})
	return due
}

// LeaseOwners counts live leases per worker.
func (f *FSM) LeaseOwners() map[string]int {
	out := map[string]int{}
	_ = f.View(func(r Reader) error {
		return r.Scan(pfxLease, nil, false, func(k, _ []byte) bool {
			run, key, ok := splitTaskID(string(k[len(pfxLease)+8:]))
			if !ok {
				return true
			}
			if t, _ := getJSON[Task](r, taskKey(run, key)); t != nil && t.LeaseOwner != "" {
				out[t.LeaseOwner]++
			}
			return true
		})
	})
	return out
}

// GetSpec returns a run's frozen spec.
func (f *FSM) GetSpec(id string) (*domain.Spec, error) {
	var out *domain.Spec
	err := f.View(func(r Reader) error {
		var err error
		out, err = loadSpec(r, id)
		if err == nil && out == nil {
			err = fmt.Errorf("%w: run %s", ErrNotFound, id)
		}
		return err
	})
	return out, err
}

// ClaimedBy returns the tasks still leased to the claim request (worker,
// req), as the claim answered them: what a re-sent claim is answered
// without proposing anything (the state machine does the same when such a
// claim reaches it).
func (f *FSM) ClaimedBy(worker, req string) ([]Claimed, error) {
	if req == "" || !ValidClaimIDs(worker, req) {
		return nil, nil
	}
	if p, ok := f.store.(store.PrefixProber); ok && !p.MayHavePrefix(claimReqPrefix(worker, req)) {
		return nil, nil // the usual case, without taking a view
	}
	var out []Claimed
	err := f.View(func(r Reader) error {
		prefix := claimReqPrefix(worker, req)
		var ids []string
		if err := r.Scan(prefix, nil, false, func(k, _ []byte) bool {
			ids = append(ids, string(k[len(prefix):]))
			return true
		}); err != nil {
			return err
		}
		for _, id := range ids {
			run, key, ok := splitTaskID(id)
			if !ok {
				continue
			}
			t, err := getJSON[Task](r, taskKey(run, key))
			if err != nil {
				return err
			}
			if t == nil || !t.Leased() || t.LeaseOwner != worker || t.LeaseRequest != req {
				continue
			}
			rr, err := getJSON[Run](r, runKey(run))
			if err != nil {
				return err
			}
			out = append(out, claimedOf(t, rr, func(k string) *Task {
				dt, _ := getJSON[Task](r, taskKey(run, k))
				return dt
			}))
		}
		return nil
	})
	return out, err
}
