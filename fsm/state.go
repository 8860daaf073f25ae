package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/tinylib/msgp/msgp"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
)

// Record access inside Apply.
//
// Handlers load records through the applier's caches and mutate them in
// place; flush writes back every record whose encoding changed, stamping its
// ModifyIndex. So a handler never forgets to store a record, and two loads of
// one record in one entry always see the same object.

func getJSON[T any](r Reader, key []byte) (*T, error) {
	v, ok, err := r.Get(key)
	if err != nil || !ok {
		return nil, err
	}
	var out T
	if err := unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("decode %q: %w", key, err)
	}
	return &out, nil
}

func must(err error) {
	if err != nil {
		panic(err) // recovered by applier.run and turned into an error result
	}
}

func (a *applier) put(key []byte, v any) {
	must(a.tx.Set(key, a.encodeOwned(v)))
}

// putFresh is put under a key built for this call (see setFresh).
func (a *applier) putFresh(key []byte, v any) {
	a.setFresh(key, a.encodeOwned(v))
}

// encodeOwned encodes a record to be written: a MessagePack record through
// the scratch buffer and then copied, so the bytes the store keeps are
// exactly its length (MarshalMsg(nil) allocates the record's Msgsize, an
// upper bound often twice the encoding, and the store kept all of it).
func (a *applier) encodeOwned(v any) []byte {
	b, scratch, err := a.encodeLoaded(v)
	must(err)
	if scratch {
		return bytes.Clone(b)
	}
	return b
}

func (a *applier) del(key []byte) { must(a.tx.Delete(key)) }

// setFresh and delFresh write or delete under a key built for this call
// (the xxxKey builders, a cache entry's key) and not used after it: the
// write buffer keeps it instead of a copy. Keys from a scan or a caller's
// buffer go through tx.Set and del, which copy.
func (a *applier) setFresh(key, val []byte) {
	if o, ok := a.tx.(*store.Overlay); ok {
		o.SetOwned(key, val)
		return
	}
	must(a.tx.Set(key, val))
}

func (a *applier) delFresh(key []byte) {
	if o, ok := a.tx.(*store.Overlay); ok {
		o.DeleteOwned(key)
		return
	}
	must(a.tx.Delete(key))
}

// cacheEntry is one loaded record and its encoding at load time.
type cacheEntry struct {
	key     []byte
	v       any
	orig    []byte // nil for a new record
	deleted bool
}

type cache struct {
	m     map[string]*cacheEntry
	order []string
	// slab holds the entries, reused from command to command (reset): no
	// allocation per record loaded. An entry is not used after reset.
	slab []cacheEntry
}

func (c *cache) get(key []byte) (*cacheEntry, bool) {
	e, ok := c.m[string(key)]
	return e, ok
}

func (c *cache) add(key []byte, v any, orig []byte) *cacheEntry {
	if c.m == nil {
		c.m = make(map[string]*cacheEntry, 8)
	}
	if len(c.slab) == cap(c.slab) {
		// A full slab is left to the entries pointing into it; the next
		// one is twice as large.
		c.slab = make([]cacheEntry, 0, max(2*cap(c.slab), 8))
	}
	c.slab = append(c.slab, cacheEntry{key: key, v: v, orig: orig})
	e := &c.slab[len(c.slab)-1]
	k := ownedString(key) // the key is handed over: the map and the order share it
	c.m[k] = e
	c.order = append(c.order, k)
	return e
}

// cached returns the entry cached under the key prefix+a+sep+b, built in a
// stack buffer: a hit (most lookups: a command reads a run, its tasks and
// their queue several times) allocates no key.
func (c *cache) cached(prefix []byte, a, sep, b string) (*cacheEntry, bool) {
	if c.m == nil {
		return nil, false
	}
	var buf [160]byte
	k := append(buf[:0], prefix...)
	k = append(append(append(k, a...), sep...), b...)
	e, ok := c.m[string(k)]
	return e, ok
}

// live is a cached entry's record, nil if the entry says it is gone.
func live[T any](e *cacheEntry) *T {
	if e.deleted || e.v == nil {
		return nil
	}
	return e.v.(*T)
}

// reset empties c, keeping its map and order for the entry's next command
// (a Multi of 16 commands allocated four maps per command).
func (c *cache) reset() {
	clear(c.m)
	clear(c.order)
	c.order = c.order[:0]
	clear(c.slab)
	c.slab = c.slab[:0]
}

// load returns the cached record for key, loading it from tx on first use.
// It returns nil when the record does not exist. key is handed over (built
// for this call, never modified after it): the cache keeps it.
//
// The stored bytes are kept as the entry's orig without a copy: a value
// read is immutable and valid until the batch's view is released
// (store.Reader), and caches are emptied after every entry.
func load[T any](a *applier, c *cache, key []byte) *T {
	if e, ok := c.get(key); ok {
		if e.deleted || e.v == nil {
			return nil
		}
		return e.v.(*T)
	}
	return loadStored[T](a, c, key, true)
}

// loadTemp is load for a key in a buffer the caller reuses: a miss (a
// submit looks up a run that does not exist yet) allocates nothing, a hit
// copies the key for the cache.
func loadTemp[T any](a *applier, c *cache, key []byte) *T {
	return loadStored[T](a, c, key, false)
}

// loadStored reads and decodes a record that is not cached and caches it
// (under key itself if owned, else a copy).
func loadStored[T any](a *applier, c *cache, key []byte, owned bool) *T {
	raw, ok, err := a.tx.Get(key)
	must(err)
	if !ok {
		return nil
	}
	var v T
	must(unmarshal(raw, &v))
	if !owned {
		key = bytes.Clone(key)
	}
	c.add(key, &v, raw)
	return &v
}

// ownedString views a handed-over byte slice (a key built for one write or
// cache entry, never modified afterwards) as a string without copying it.
func ownedString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

type modifiable interface {
	setModifyIndex(uint64)
	modifyIndex() uint64
}

func (r *Run) setModifyIndex(i uint64)  { r.ModifyIndex = i }
func (t *Task) setModifyIndex(i uint64) { t.ModifyIndex = i }
func (r *Run) modifyIndex() uint64      { return r.ModifyIndex }
func (t *Task) modifyIndex() uint64     { return t.ModifyIndex }

// discard drops the caches unwritten (a failed Multi sub-command).
func (a *applier) discard() {
	a.runs.reset()
	a.taskCache.reset()
	a.queues.reset()
	a.breakers.reset()
	a.counters, a.settings, a.settingsDirty = nil, nil, false
	a.queueNamesOK = false
	a.rules = nil
	a.rulesRunsOK = false
}

// legacySame reports whether a record loaded from a JSON encoding (written
// before its type moved to MessagePack) is unchanged: its stored bytes are
// re-encoded the way b was, so an untouched legacy record keeps its bytes
// and its modify index instead of being rewritten by a read.
func legacySame(e *cacheEntry, b []byte) bool {
	if len(e.orig) == 0 || e.orig[0] != '{' || len(b) == 0 || b[0] == '{' {
		return false
	}
	old := reflect.New(reflect.TypeOf(e.v).Elem()).Interface()
	if unmarshal(e.orig, old) != nil {
		return false
	}
	ob, err := marshal(old)
	return err == nil && bytes.Equal(ob, b)
}

// encodeLoaded encodes a loaded record at its loaded index, into a.scratch
// (scratch true: valid until the next call) when it has a MessagePack
// encoding.
func (a *applier) encodeLoaded(v any) (b []byte, scratch bool, err error) {
	if m, ok := v.(msgp.Marshaler); ok {
		a.scratch, err = m.MarshalMsg(a.scratch[:0])
		return a.scratch, true, err
	}
	if j, ok := v.(jsonAppender); ok {
		if out, ok := j.appendJSON(a.scratch[:0]); ok {
			a.scratch = out
			return out, true, nil
		}
	}
	b, err = marshal(v)
	return b, false, err
}

// keepQueueRecords keeps queue and breaker records cached across an entry's
// commands (see flush); a test turns it off to check that doing so changes
// no state (TestKeptQueueRecordsChangeNothing).
var keepQueueRecords = true

// flush writes back changed records, counters and caches.
func (a *applier) flush() {
	for _, c := range []*cache{&a.runs, &a.taskCache, &a.queues, &a.breakers} {
		// Queue and breaker records stay cached after they are written,
		// for the entry's next command (each submit and claim of a group
		// entry read its queue again: a JSON decode per command); orig
		// becomes what was written. A failed command discards the caches
		// (discard), so nothing it changed survives in them.
		keep, deleted := keepQueueRecords && (c == &a.queues || c == &a.breakers), false
		for _, k := range c.order {
			e := c.m[k]
			if e.deleted {
				a.del(e.key)
				deleted = true
				continue
			}
			// A loaded record still holds the index it was loaded with:
			// encoded as it is, it compares equal to its stored bytes when
			// nothing changed (and is not rewritten); otherwise it is
			// stamped and encoded again.
			m, stamped := e.v.(modifiable)
			if stamped && e.orig == nil {
				m.setModifyIndex(a.index)
			}
			if e.orig == nil {
				b := a.encodeOwned(e.v)
				a.setFresh(e.key, b)
				if keep {
					e.orig = b
				}
				continue
			}
			// A MessagePack record's comparison encoding goes to a scratch
			// buffer: most loaded records did change and are encoded
			// again, stamped.
			b, scratch, err := a.encodeLoaded(e.v)
			must(err)
			if bytes.Equal(b, e.orig) || legacySame(e, b) {
				continue
			}
			switch {
			case stamped:
				old := m.modifyIndex()
				m.setModifyIndex(a.index)
				if nb, ok := restamp(e.v, b, old, a.index); ok {
					b = nb
				} else {
					b, err = marshal(e.v)
					must(err)
				}
			case scratch:
				b = bytes.Clone(b)
			}
			a.setFresh(e.key, b)
			if keep {
				e.orig = b
			}
		}
		if !keep || deleted {
			c.reset()
		}
	}
	if a.counters != nil {
		a.put(keyCounters, a.counters)
		a.counters = nil
	}
	if a.settingsDirty {
		a.put(keySettings, a.settings)
		a.settingsDirty = false
	}
}

func (a *applier) loadRun(id string) *Run {
	if e, ok := a.runs.cached(pfxRun, id, "", ""); ok {
		return live[Run](e)
	}
	a.keyBuf = append(append(a.keyBuf[:0], pfxRun...), id...)
	return loadTemp[Run](a, &a.runs, a.keyBuf)
}

func (a *applier) newRun(r *Run) { a.runs.add(runKey(r.ID), r, nil) }

func (a *applier) loadTask(runID, key string) *Task {
	if e, ok := a.taskCache.cached(pfxTask, runID, "/", key); ok {
		return live[Task](e)
	}
	return load[Task](a, &a.taskCache, taskKey(runID, key))
}

func (a *applier) newTask(t *Task) { a.taskCache.add(taskKey(t.RunID, t.Key), t, nil) }

// loadTaskByID loads a task by its protocol id "<run>/<key>".
func (a *applier) loadTaskByID(id string) *Task {
	run, key, ok := splitTaskID(id)
	if !ok {
		return nil
	}
	return a.loadTask(run, key)
}

func (a *applier) deleteRecord(c *cache, key []byte) {
	if e, ok := c.get(key); ok {
		e.deleted = true
		return
	}
	e := c.add(key, nil, nil)
	e.deleted = true
}

// SplitTaskID splits a protocol task id "<run>/<key>".
func SplitTaskID(id string) (run, key string, ok bool) { return splitTaskID(id) }

func splitTaskID(id string) (run, key string, ok bool) {
	i := strings.IndexByte(id, '/')
	if i <= 0 || i == len(id)-1 {
		return "", "", false
	}
	return id[:i], id[i+1:], true
}

// runTasks loads every task of a run, in display order, through the cache.
func (a *applier) runTasks(runID string) []*Task {
	pfx := taskPrefix(runID)
	var keys []string
	must(a.tx.Scan(pfx, nil, false, func(k, _ []byte) bool {
		keys = append(keys, string(k[len(pfx):]))
		return true
	}))
	// Records created in this entry are in the cache but not yet in tx.
	// A run's few keys are compared in place; a map for many.
	var seen map[string]bool
	if len(keys) > 16 {
		seen = make(map[string]bool, len(keys))
		for _, k := range keys {
			seen[k] = true
		}
	}
	for _, ck := range a.taskCache.order {
		if len(ck) <= len(pfx) || ck[:len(pfx)] != string(pfx) {
			continue
		}
		k := ck[len(pfx):]
		if seen != nil && seen[k] || seen == nil && slices.Contains(keys, k) {
			continue
		}
		keys = append(keys, k)
		if seen == nil && len(keys) > 16 {
			seen = make(map[string]bool, len(keys))
			for _, k := range keys {
				seen[k] = true
			}
		} else if seen != nil {
			seen[k] = true
		}
	}
	out := make([]*Task, 0, len(keys))
	for _, k := range keys {
		if t := a.loadTask(runID, k); t != nil {
			out = append(out, t)
		}
	}
	sortTasks(out)
	return out
}

func sortTasks(ts []*Task) {
	slices.SortStableFunc(ts, func(x, y *Task) int { return cmp.Compare(x.Seq, y.Seq) })
}

func (a *applier) getSettings() *Settings {
	if a.settings == nil {
		s, err := getJSON[Settings](a.tx, keySettings)
		must(err)
		if s == nil {
			s = &Settings{}
		}
		a.settings = s
	}
	return a.settings
}

func (a *applier) getCounters() *Counters {
	if a.counters == nil {
		c, err := getJSON[Counters](a.tx, keyCounters)
		must(err)
		if c == nil {
			c = &Counters{}
		}
		a.counters = c
	}
	return a.counters
}

func (a *applier) queue(name string) *QueueState {
	if e, ok := a.queues.cached(pfxQueue, name, "", ""); ok && !e.deleted && e.v != nil {
		return e.v.(*QueueState)
	}
	if q := load[QueueState](a, &a.queues, queueKey(name)); q != nil {
		return q
	}
	q := &QueueState{Name: name}
	a.queues.add(queueKey(name), q, nil)
	a.queueNamesOK = false
	return q
}

func (a *applier) breaker(typ string) *Breaker {
	if e, ok := a.breakers.cached(pfxBreaker, typ, "", ""); ok && !e.deleted && e.v != nil {
		return e.v.(*Breaker)
	}
	if b := load[Breaker](a, &a.breakers, breakerKey(typ)); b != nil {
		return b
	}
	b := &Breaker{Type: typ, State: BreakerClosed}
	e := a.breakers.add(breakerKey(typ), b, nil)
	// A fresh closed breaker is only worth storing once it changes.
	e.orig, _ = marshal(b)
	return b
}

// storedBreaker is breaker for a caller with nothing to do on a fresh
// (closed, unstored) breaker: nil instead of making one, so a type whose
// breaker never changed costs no record (and its comparison encoding at
// flush) on every completion.
func (a *applier) storedBreaker(typ string) *Breaker {
	if e, ok := a.breakers.cached(pfxBreaker, typ, "", ""); ok {
		return live[Breaker](e)
	}
	a.keyBuf = append(append(a.keyBuf[:0], pfxBreaker...), typ...)
	return loadTemp[Breaker](a, &a.breakers, a.keyBuf)
}

// nextSeq returns a number that orders things within this entry and after
// every earlier entry: index<<20 | n.
func (a *applier) nextSeq() uint64 {
	a.seq++
	return a.index<<20 | uint64(a.seq)
}

// emit records an event of this entry.
func (a *applier) emit(ev Event) {
	ev.Index = a.index
	ev.Seq = a.evSeq
	a.evSeq++
	ev.At = a.now
	a.events = append(a.events, ev)
	a.getCounters().Events++ // written with the entry, in writeEvents
}

// writeEvents stores the entry's events under one key and trims the
// window, oldest entries first. Only the entry's own applier calls it (the
// appliers of a Multi's sub-commands hand their events up).
func (a *applier) writeEvents() {
	if len(a.events) > 0 {
		a.putFresh(eventKey(a.index, uint32(len(a.events))), a.events)
	}
	c := a.getCounters()
	w := a.getSettings().eventWindow()
	if c.Events <= w+eventTrimSlack(w) {
		return
	}
	// Start after the last trimmed entry: the deleted keys before it are
	// tombstones a scan from the prefix start would have to skip.
	var keys [][]byte
	excess := c.Events - w
	must(a.tx.Scan(pfxEvent, eventsFrom(c.TrimmedThrough+1), false, func(k, _ []byte) bool {
		keys = append(keys, bytes.Clone(k))
		excess -= int(binary.BigEndian.Uint32(k[len(pfxEvent)+8:]))
		return excess > 0
	}))
	for _, k := range keys {
		a.del(k)
		c.Events -= int(binary.BigEndian.Uint32(k[len(pfxEvent)+8:]))
		c.TrimmedThrough = getU64(k[len(pfxEvent) : len(pfxEvent)+8])
	}
}

// stepTask moves t along edge and emits the event. The caller has checked
// the precondition; an illegal edge here is a bug and panics (recovered into
// an error result, changing nothing). The run's counts follow.
func (a *applier) stepTask(r *Run, t *Task, edge string, extra func(*Event)) {
	from := t.State
	to, err := domain.TaskMachine.Step(from, edge)
	must(err)
	t.State = to
	if to != domain.TaskReady {
		a.setDue(t, 0) // a ready task's timer ends with its readiness
	}
	if r.Counts == nil {
		r.Counts = domain.TaskCounts{}
	}
	r.Counts[from]--
	if r.Counts[from] == 0 {
		delete(r.Counts, from)
	}
	r.Counts[to]++
	ev := Event{Kind: "task", RunID: t.RunID, TaskKey: t.Key, Transition: edge, From: string(from),
		To: string(to), Attempt: t.Attempt, Queue: t.Queue, Type: t.Type}
	switch {
	case edge == domain.EdgeClaim:
		ev.Since = t.ReadyAt
	case a.ended.task == t:
		ev.Since, ev.Outcome = a.ended.claimedAt, a.ended.outcome
		a.ended = endedAttempt{}
	}
	a.emit(ev)
	if extra != nil {
		// On the emitted copy: ev stays on the stack (extra sets fields
		// emit does not).
		extra(&a.events[len(a.events)-1])
	}
}

// stepRun moves r along edge, updating indexes and counters, and emits the
// event.
func (a *applier) stepRun(r *Run, edge string) {
	from := r.State
	to, err := domain.RunMachine.Step(from, edge)
	must(err)
	a.setRunState(r, to)
	ev := Event{Kind: "run", RunID: r.ID, Transition: edge, From: string(from), To: string(to), Error: r.Reason}
	if to.Done() {
		ev.Since, ev.Workflow = r.StartedAt, r.Workflow
		if ev.Since == 0 {
			ev.Since = r.CreatedAt
		}
	}
	a.emit(ev)
	if to.Done() && r.ParentID != "" {
		a.childRunDone(r) // a child run: its parent task ends (apply_child.go)
	}
}

func activeRun(s domain.RunState) bool {
	return s == domain.RunRunning || s == domain.RunInterrupted || s == domain.RunReverting
}

func (a *applier) setRunState(r *Run, to domain.RunState) {
	from := r.State
	if from != "" {
		// runStateKey in a reused buffer: a delete copies the key only
		// when it leaves a tombstone (not for the pending key of a run
		// admitted in the entry that created it).
		a.keyBuf = append(append(append(append(a.keyBuf[:0], pfxRunState...), from...), '/'), r.ID...)
		a.del(a.keyBuf)
	}
	r.State = to
	if o, ok := a.tx.(*store.Overlay); ok && from == "" {
		// A run created in this entry: its first state key is new, so
		// leaving pending at once (admitted) writes no tombstone.
		o.SetNewOwned(runStateKey(string(to), r.ID), []byte{})
	} else {
		a.setFresh(runStateKey(string(to), r.ID), []byte{})
	}
	c := a.getCounters()
	if activeRun(from) && !activeRun(to) {
		c.ActiveRuns--
	}
	if !activeRun(from) && activeRun(to) {
		c.ActiveRuns++
	}
	if to == domain.RunRunning && r.StartedAt == 0 {
		r.StartedAt = a.now
	}
	if r.FinishedAt != 0 {
		a.del(finishedKey(r.FinishedAt, r.ID))
		r.FinishedAt = 0
	}
	if to.Done() {
		r.FinishedAt = a.now
		a.setFresh(finishedKey(r.FinishedAt, r.ID), []byte{})
	}
	a.rearmRun(r)
}
