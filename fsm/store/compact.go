package store

import (
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname, for badger's compactor switch

	badger "github.com/dgraph-io/badger/v4"
)

// badger's compactors wake every 50 ms each, with or without work, and
// offer no switch: these are its own (unexported) stop and start, the ones
// Flatten and DropAll use around their work. Linked by name, so a badger
// release that renames or drops them fails the build, never the store.
//
//go:linkname badgerStopCompactions github.com/dgraph-io/badger/v4.(*DB).stopCompactions
func badgerStopCompactions(db *badger.DB)

//go:linkname badgerStartCompactions github.com/dgraph-io/badger/v4.(*DB).startCompactions
func badgerStartCompactions(db *badger.DB)

// DefaultCompactorIdle is how long the store must go without a commit, with
// nothing left to compact, before its compactors stop (BadgerOptions).
const DefaultCompactorIdle = 10 * time.Second

// compactGate stops badger's compactors while the store is idle and starts
// them again on the next commit (see DESIGN.md, "Compactors sleep while
// idle"). While they run, the gate looks every idle period: no commit since
// the last look and nothing to compact (no table in L0, every level under
// its target) stops them. While they are stopped nothing of it wakes; a
// commit wakes it through a channel.
type compactGate struct {
	db   *badger.DB
	idle time.Duration

	mu      sync.Mutex    // held across a stop or start, and around DropAll
	stopped atomic.Bool   // the compactors are stopped by the gate
	commits atomic.Uint64 // Commit calls so far
	wake    chan struct{} // a commit while stopped (one token)
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
	// changed, if set (tests), is called after every stop (true) or start
	// (false), under mu.
	changed func(stopped bool)
}

func newCompactGate(db *badger.DB, idle time.Duration, changed func(stopped bool)) *compactGate {
	g := &compactGate{db: db, idle: idle, changed: changed, wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	if idle <= 0 { // the compactors always run
		close(g.done)
		return g
	}
	go g.run()
	return g
}

// committed is called by every Commit: an atomic add, and a channel send
// only when the compactors are stopped.
func (g *compactGate) committed() {
	g.commits.Add(1)
	if g.stopped.Load() {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

func (g *compactGate) run() {
	defer close(g.done)
	t := time.NewTimer(g.idle)
	defer t.Stop()
	seen := g.commits.Load()
	for {
		select {
		case <-g.quit:
			return
		case <-t.C:
		}
		if n := g.commits.Load(); n != seen {
			seen = n
			t.Reset(g.idle)
			continue
		}
		if g.stop(seen) {
			select {
			case <-g.quit:
				return
			case <-g.wake:
			}
			g.start()
		}
		seen = g.commits.Load()
		t.Reset(g.idle)
	}
}

// settled reports whether badger has nothing it would compact.
func (g *compactGate) settled() bool {
	for _, l := range g.db.Levels() {
		if (l.Level == 0 && l.NumTables > 0) || l.Adjusted >= 1 || l.Score >= 1 {
			return false
		}
	}
	return true
}

// stop stops the compactors unless there is something to compact or a
// commit came after seen. The flag is
// set before the count is read again and a commit counts before it reads
// the flag, so either the gate sees the commit and stays up, or the commit
// sees the flag and wakes it.
func (g *compactGate) stop(seen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.settled() {
		return false
	}
	select { // a token left by a commit of an earlier round
	case <-g.wake:
	default:
	}
	g.stopped.Store(true)
	if g.commits.Load() != seen {
		g.stopped.Store(false)
		return false
	}
	badgerStopCompactions(g.db)
	if g.changed != nil {
		g.changed(true)
	}
	return true
}

func (g *compactGate) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.stopped.Load() {
		return // exclusive started them
	}
	badgerStartCompactions(g.db)
	g.stopped.Store(false)
	if g.changed != nil {
		g.changed(false)
	}
}

// exclusive runs f with the compactors running and the gate held off: for
// Replace, whose DropAll stops and starts them itself (the gate must not
// start them twice) and whose bulk load does not go through Commit.
func (g *compactGate) exclusive(f func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped.Load() {
		badgerStartCompactions(g.db)
		g.stopped.Store(false)
		select { // the gate goes back to watching
		case g.wake <- struct{}{}:
		default:
		}
		if g.changed != nil {
			g.changed(false)
		}
	}
	err := f()
	g.commits.Add(1) // what f wrote counts as a commit
	return err
}

// close ends the gate before the store closes (badger's Close stops the
// compactors, running or not).
func (g *compactGate) close() {
	g.once.Do(func() {
		if g.idle > 0 {
			close(g.quit)
		}
	})
	<-g.done
}
