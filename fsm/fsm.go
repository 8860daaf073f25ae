package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Sentinel errors of the state machine, aliased from domain where they
// originate so errors.Is works across layers.
var (
	ErrNotFound          = domain.ErrNotFound
	ErrIllegalTransition = domain.ErrIllegalTransition
	ErrInvalidSpec       = domain.ErrInvalidSpec
	ErrTooLarge          = domain.ErrTooLarge
	ErrTooManyRuns       = domain.ErrTooManyRuns
	ErrInvalidArgument   = domain.ErrInvalidArgument
	// ErrApplyPanic wraps a recovered panic inside Apply: a bug, reported
	// as the entry's result on every replica, with nothing changed.
	ErrApplyPanic = errors.New("apply panicked")
)

// MaxEntryWriteBytes bounds what one log entry may write. An entry over it
// is rejected (deterministically, on every replica) rather than split.
const MaxEntryWriteBytes = 8 << 20

// txnBudget is the size at which a batch's writes are split into another
// store transaction (always at an entry boundary).
const txnBudget = 4 << 20

// Entry is one committed raft log entry handed to the FSM.
type Entry struct {
	Index uint64
	Data  []byte
}

// FSM is flowd's replicated state machine.
//
// Concurrency: ApplyBatch, Restore and Snapshot are called by one goroutine
// (raft's FSM goroutine) and never concurrently with each other; reads
// (View and the query methods) may run at any time from any goroutine and
// see the state as of the last committed batch. Subscribers are woken after
// each commit.
type FSM struct {
	store  store.Store
	limits domain.Limits
	log    *slog.Logger

	applied atomic.Uint64
	now     atomic.Int64 // the FSM clock as of the last commit (Now)
	// version is the active state-machine version as of the last commit
	// (ActiveVersion, asked by every write handler, takes no store view).
	version atomic.Uint32
	// OnFatal is called when the local store cannot write. The node must
	// stop rather than diverge; the default panics.
	OnFatal func(error)

	mu      sync.Mutex
	changed chan struct{} // closed and replaced after every commit
	// schedChanged is closed and replaced after a commit that changed a
	// schedule (a schedule event) and after a restore.
	schedChanged chan struct{}
	lastEvs      []Event
	hook         atomic.Pointer[func([]Event)]
	// scratch holds the buffers ApplyBatch reuses (scratch.go).
	scratch atomic.Pointer[applyScratch]
}

// SetCommitHook sets fn to be called with the events of every commit, after
// they are published, on the applying goroutine (nil removes it). fn must be
// quick, must not keep or modify the slice, and must not wait for the FSM.
func (f *FSM) SetCommitHook(fn func([]Event)) {
	if fn == nil {
		f.hook.Store(nil)
		return
	}
	f.hook.Store(&fn)
}

// Options configure an FSM.
type Options struct {
	Limits domain.Limits
	Logger *slog.Logger
}

// New returns an FSM over store, resuming from the applied index stored in it.
func New(s store.Store, o Options) (*FSM, error) {
	if o.Limits.MaxTasks == 0 {
		o.Limits = domain.DefaultLimits
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := &FSM{store: s, limits: o.Limits, log: o.Logger, changed: make(chan struct{}), schedChanged: make(chan struct{})}
	f.OnFatal = func(err error) { panic(fmt.Sprintf("flowd: local state store failed, stopping: %v", err)) }
	idx, err := f.readApplied()
	if err != nil {
		return nil, err
	}
	f.applied.Store(idx)
	if err := f.loadNow(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) readApplied() (uint64, error) {
	r, release, err := f.store.View()
	if err != nil {
		return 0, err
	}
	defer release()
	v, _, err := r.Get(keyApplied)
	return getU64(v), err
}

// loadNow reads the FSM clock and the active version from the store into
// f.now and f.version (kept there so that Now, asked by the dispatcher after
// every commit and by every claim, and ActiveVersion, asked by every write,
// take no store view).
func (f *FSM) loadNow() error {
	r, release, err := f.store.View()
	if err != nil {
		return err
	}
	defer release()
	v, _, err := r.Get(keyNow)
	if err != nil {
		return err
	}
	f.now.Store(int64(getU64(v)))
	ver, err := readVersion(r)
	f.version.Store(uint32(ver))
	return err
}

// Store returns the underlying store.
func (f *FSM) Store() store.Store { return f.store }

// Limits returns the limits Apply enforces.
func (f *FSM) Limits() domain.Limits { return f.limits }

// AppliedIndex is the index of the last entry whose effects are committed.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Changed returns a channel closed at the next commit of applied entries.
// Take it before reading state, then wait on it: no commit can be missed.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// SchedulesChanged returns a channel closed at the next commit that
// changes a schedule record (or restore): the leader's schedule loop waits
// on it rather than re-reading every schedule after every commit.
func (f *FSM) SchedulesChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.schedChanged
}

// LastEvents returns the events of the most recent commit (shared; do not
// modify).
func (f *FSM) LastEvents() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastEvs
}

// Apply applies a single entry (see ApplyBatch).
func (f *FSM) Apply(e Entry) any { return f.ApplyBatch([]Entry{e})[0] }

// ApplyBatch applies committed entries in order and commits their effects,
// together with the last applied index, in one store transaction (split only
// at entry boundaries when very large). Entries at or below the stored
// applied index were applied before a restart and are skipped.
//
// Each entry's changes are journaled in the batch's write buffer; an entry
// whose command is rejected (undecodable, invalid, or a panic inside apply)
// returns an error result and its changes are undone, so it changes
// nothing on any replica.
func (f *FSM) ApplyBatch(entries []Entry) []any {
	results := make([]any, len(entries))
	view := f.store.View
	if av, ok := f.store.(interface {
		ApplyView() (Reader, func(), error)
	}); ok {
		view = av.ApplyView
	}
	base, release, err := view()
	if err != nil {
		f.OnFatal(err)
		return results
	}
	defer release()
	// One write buffer for the batch; each entry's changes are journaled in
	// it and undone if the entry is rejected. A buffer past txnBudget is
	// closed at an entry boundary (its writes become one store transaction)
	// and the next chains on it, so reads still see every earlier entry.
	sc := f.scratch.Swap(nil)
	if sc == nil {
		sc = newApplyScratch()
	}
	defer f.scratch.Store(sc)
	batch := sc.overlay(base)
	var closed []*store.Overlay
	var events []Event
	applied := f.applied.Load()
	last := applied
	maxBytes, maxWrites := math.MaxInt, math.MaxInt
	if tl, ok := f.store.(store.TxnLimiter); ok {
		if b, w := tl.TxnLimits(); b > 0 && w > 0 {
			maxBytes, maxWrites = b, w
		}
	}
	inBatch := 0    // entries in the current buffer
	var fatal error // a VersionError: stop after committing what came before
	for i, e := range entries {
		if e.Index <= applied {
			results[i] = nil
			continue
		}
		batch.Begin()
		a := &applier{tx: batch, index: e.Index, limits: f.limits}
		sc.lend(a)
		res := a.run(e.Data)
		if ve, ok := res.(*VersionError); ok {
			// This binary cannot apply the version the cluster moves to:
			// stop before the entry, keeping what came before it.
			batch.Rollback()
			fatal = ve
			break
		}
		if inBatch > 0 && (batch.Size() > maxBytes || batch.Len() > maxWrites) {
			// This entry would take the buffer past what one store
			// transaction holds: undo it, close the buffer before it, and
			// apply it again (deterministically the same) in the next one.
			batch.Rollback()
			closed = append(closed, batch)
			batch, inBatch = sc.overlay(batch), 0
			batch.Begin()
			sc.takeBack(a)
			a = &applier{tx: batch, index: e.Index, limits: f.limits}
			sc.lend(a)
			res = a.run(e.Data)
		}
		if _, isErr := res.(error); isErr || batch.EntrySize() > MaxEntryWriteBytes {
			if !isErr {
				res = fmt.Errorf("%w: entry would write %d bytes (limit %d)", ErrTooLarge, batch.EntrySize(), MaxEntryWriteBytes)
			}
			batch.Rollback() // rejected: nothing changes, but the index advances
		} else {
			batch.End()
			events = append(events, a.events...)
		}
		sc.takeBack(a)
		_ = batch.Set(keyApplied, u64(e.Index))
		last = e.Index
		results[i] = res
		inBatch++
		if batch.Size() > txnBudget && i < len(entries)-1 {
			closed = append(closed, batch)
			batch, inBatch = sc.overlay(batch), 0
		}
	}
	if fatal != nil {
		defer f.OnFatal(fatal)
	}
	if last == applied {
		return results
	}
	txns, writes := sc.commitBuffers()
	for _, o := range append(closed, batch) {
		from := len(writes)
		writes = o.AppendWrites(writes)
		txns = append(txns, writes[from:len(writes):len(writes)])
	}
	cerr := f.store.Commit(txns)
	sc.keepCommitBuffers(txns, writes)
	if cerr != nil {
		f.OnFatal(cerr)
		return results
	}
	if v, _, err := batch.Get(keyNow); err == nil {
		f.now.Store(int64(getU64(v)))
	}
	if v, err := readVersion(batch); err == nil {
		f.version.Store(uint32(v))
	}
	sc.recycle(append(closed, batch)...)
	f.applied.Store(last)
	f.publish(events)
	return results
}

func (f *FSM) publish(events []Event) { f.publishAll(events, false) }

// publishAll wakes the waiters of a commit; allSchedules also wakes the
// schedule waiters when no event names a schedule (a restore).
func (f *FSM) publishAll(events []Event, allSchedules bool) {
	sched := allSchedules
	for i := range events {
		if events[i].Kind == "schedule" {
			sched = true
			break
		}
	}
	f.mu.Lock()
	ch := f.changed
	f.changed = make(chan struct{})
	var sch chan struct{}
	if sched {
		sch = f.schedChanged
		f.schedChanged = make(chan struct{})
	}
	f.lastEvs = events
	f.mu.Unlock()
	close(ch)
	if sch != nil {
		close(sch)
	}
	if fn := f.hook.Load(); fn != nil && len(events) > 0 {
		(*fn)(events)
	}
}

// run decodes and applies one command, turning a panic into an error.
func (a *applier) run(data []byte) (res any) {
	defer func() {
		if r := recover(); r != nil {
			res = fmt.Errorf("%w at index %d: %v\n%s", ErrApplyPanic, a.index, r, debug.Stack())
		}
	}()
	cmd, err := Decode(data)
	if errors.Is(err, errIgnored) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := a.clock(cmd); err != nil {
		return err
	}
	res = a.dispatch(cmd)
	if _, isErr := res.(error); !isErr {
		a.writeEvents()
		a.flush()
	}
	return res
}

// safeDispatch applies one command of a Multi, recovering a panic into an
// error and flushing on success.
func (a *applier) safeDispatch(cmd Command) (res any) {
	defer func() {
		if r := recover(); r != nil {
			res = fmt.Errorf("%w at index %d: %v", ErrApplyPanic, a.index, r)
		}
	}()
	res = a.dispatch(cmd)
	if _, isErr := res.(error); !isErr {
		a.flush()
	}
	return res
}

// testApplyHook, when set by a test, runs before every command is applied
// (to inject a bug and prove Apply survives it).
var testApplyHook func(Command)

// dispatch is the one switch from command to handler.
func (a *applier) dispatch(cmd Command) any {
	if testApplyHook != nil {
		testApplyHook(cmd)
	}
	if err := a.checkSince(cmd); err != nil {
		return err
	}
	switch c := cmd.(type) {
	case *Submit:
		return a.applySubmit(c)
	case *Claim:
		return a.applyClaim(c)
	case *Heartbeat:
		return a.applyHeartbeat(c)
	case *Complete:
		res := a.applyComplete(c)
		if ack, ok := res.(*AckResult); ok && c.Claim != nil {
			got := a.applyClaim(&Claim{Waiters: []Waiter{*c.Claim}}).(*ClaimResult).Assigned[0]
			ack.Claimed = append(make([]Claimed, 0, len(got)), got...)
		}
		return res
	case *Fail:
		return a.applyFail(c)
	case *Reap:
		return a.applyReap(c)
	case *NewTerm:
		return a.applyNewTerm(c)
	case *Tick:
		return a.applyTick(c)
	case *RunVerb:
		return a.applyRunVerb(c)
	case *Replay:
		return a.applyReplay(c)
	case *RunRetry:
		return a.applyRunRetry(c)
	case *QueueSet:
		return a.applyQueueSet(c)
	case *QueuePause:
		return a.applyQueuePause(c)
	case *QueueDelete:
		return a.applyQueueDelete(c)
	case *QueueAuto:
		return a.applyQueueAuto(c)
	case *QueueCap:
		return a.applyQueueCap(c)
	case *RateLimitSet:
		return a.applyRateLimitSet(c)
	case *SettingsSet:
		return a.applySettingsSet(c)
	case *GC:
		return a.applyGC(c)
	case *ScheduleCreate:
		return a.applyScheduleCreate(c)
	case *ScheduleFire:
		return a.applyScheduleFire(c)
	case *SchedulePause:
		return a.applySchedulePause(c)
	case *ScheduleTrigger:
		return a.applyScheduleTrigger(c)
	case *ScheduleDelete:
		return a.applyScheduleDelete(c)
	case *Multi:
		return a.applyMulti(c)
	case *Noop:
		return nil
	case *TaskSignal:
		return a.applyTaskSignal(c)
	case *RunSignal:
		return a.applyRunSignal(c)
	case *DefinitionPut:
		return a.applyDefinitionPut(c)
	case *SubmitDefinition:
		return a.applySubmitDefinition(c)
	case *NodeInfo:
		return a.applyNodeInfo(c)
	case *ACLTokenCreate:
		return a.applyACLTokenCreate(c)
	case *ACLTokenDelete:
		return a.applyACLTokenDelete(c)
	case *SetVersion:
		return a.applySetVersion(c)
	default:
		return fmt.Errorf("%w: no handler for %s", ErrBadCommand, cmd.Type())
	}
}

// applier carries the state of applying one entry.
type applier struct {
	tx     store.Tx
	index  uint64
	now    int64
	seq    uint32 // per-entry counter for ready order
	evSeq  uint32 // per-entry event counter
	limits domain.Limits
	events []Event
	// ended is the attempt endLease closed last, until the task's next
	// event carries it (Event.Since, Event.Outcome).
	ended endedAttempt
	// startAt is the delayed start of the run the current Submit creates.
	startAt int64
	// readyCursor remembers, during one claim, where each ready list's
	// scan left off (see nextReady).
	readyCursor map[string]*[]byte
	// throttled collects, during one claim, the queues whose ready work a
	// rate limit held back (apply_ratelimit.go).
	throttled map[string]bool
	// pick is nextReady's scan state and pickFn its visit, made once per
	// applier: a closure per scan, and the variables it captured, were
	// allocated on every ready-list scan.
	pick   readyPick
	pickFn func(k, v []byte) bool

	runs, taskCache, queues, breakers cache
	// queueNamesMemo is queueNames' answer, kept for the entry's later claims
	// while queueNamesOK: every waiter without a queue filter asks, and the
	// answer changes only when a queue is created or deleted (queue and
	// applyQueueDelete clear queueNamesOK, and discard, which drops a failed
	// command's new queues). A flush changes where a name is read from (the
	// cache's order or the store), not the set.
	queueNamesMemo []string
	queueNamesOK   bool
	scratch        []byte // flush's comparison encodings
	keyBuf         []byte // a lookup key not kept (loadRun's miss)
	pfxBuf         []byte // nextReady's ready-list prefix
	settings       *Settings
	settingsDirty  bool
	counters       *Counters
	// rules caches the entry's rules records (apply_decide.go) by run id,
	// nil for a run without; discard drops it.
	rules map[string]*runRules
	// rulesRuns is keyRulesRuns as this entry sees it, once read.
	rulesRuns   uint64
	rulesRunsOK bool
}

// clock advances FSM time: now = max(last now, command stamp).
func (a *applier) clock(cmd Command) error {
	v, _, err := a.tx.Get(keyNow)
	if err != nil {
		return err
	}
	last := int64(getU64(v))
	at := cmd.Time()
	a.now = max(last, at)
	if a.now != last {
		return a.tx.Set(keyNow, u64(uint64(a.now)))
	}
	return nil
}
