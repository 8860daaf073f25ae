package fsm

import (
	"bytes"

	"github.com/flowd/flowd/fsm/store"
)

// labelMirror holds an IndexedStore's label index (rl/, labelindex.go) in
// a B-tree of its own, built in the background when the store is opened or
// replaced. The runs' labels are collected in the same scan of the run
// records that derives the other indexes, but making and inserting their
// keys is the bulk of their cost (about three million B-tree inserts for
// 1M runs with three labels, several seconds) and nothing but run.list
// reads them, so the store is in service without waiting: until the tree is ready a list with labels
// scans the runs as it did before the index existed (listRuns asks
// labelIndexReady), with the same answers. Writes committed meanwhile are
// kept in order and applied to the tree before it is published. Every
// field is guarded by the store's mu; the builder goroutine touches only
// its own keys and tree until it takes mu to publish.
type labelMirror struct {
	tree    *store.Tree   // nil until built
	snap    *store.Tree   // read-only clone shared by views since the last commit
	pending []store.Write // rl/ writes committed while building
	ready   chan struct{} // closed when tree is set
	stop    chan struct{} // closed to abandon the build
	done    chan struct{} // closed when the builder has returned
}

// labelledRun is a run's id and labels, as the rebuild found them.
type labelledRun struct {
	id     string
	labels Labels
}

// startLabelBuild installs a new, empty label mirror and builds the runs'
// label keys into it in the background. Called with s.mu held, after
// stopLabelBuild.
func (s *IndexedStore) startLabelBuild(runs []labelledRun) {
	m := labelMirror{ready: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.labels = m
	go func() {
		defer close(m.done)
		tree := store.NewTree()
		var keys [][]byte
		for i, lr := range runs {
			if i%4096 == 0 {
				select {
				case <-m.stop:
					return
				default:
				}
			}
			keys = labelKeys(keys[:0], &Run{ID: lr.id, Labels: lr.labels})
			for _, k := range keys {
				tree.Put(k, []byte{})
			}
		}
		if labelBuildHook != nil {
			labelBuildHook()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.labels.done != m.done {
			return // replaced meanwhile
		}
		for _, w := range s.labels.pending {
			applyToTree(tree, w)
		}
		s.labels.pending, s.labels.tree = nil, tree
		close(m.ready)
	}()
}

// labelBuildHook, when set (tests), runs in the builder before it
// publishes the tree.
var labelBuildHook func()

// stopLabelBuild abandons a build still running and waits for it to
// return. Called without s.mu held.
func (s *IndexedStore) stopLabelBuild() {
	s.mu.Lock()
	m := s.labels
	s.mu.Unlock()
	if m.stop == nil {
		return
	}
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// commitLabel applies one committed rl/ write. Called with s.mu held.
func (s *IndexedStore) commitLabel(w store.Write) {
	if s.labels.tree == nil {
		w.Key = bytes.Clone(w.Key)
		if w.Val != nil {
			w.Val = []byte{}
		}
		s.labels.pending = append(s.labels.pending, w)
		return
	}
	s.labels.snap = nil
	applyToTree(s.labels.tree, w)
}

func applyToTree(t *store.Tree, w store.Write) {
	if w.Val == nil {
		t.Delete(w.Key)
	} else {
		t.Put(bytes.Clone(w.Key), []byte{})
	}
}

// labelView is the label mirror for a view: nil while it is being built.
// Called with s.mu held.
func (s *IndexedStore) labelView() *store.Tree {
	if s.labels.tree == nil {
		return nil
	}
	if s.labels.snap == nil {
		s.labels.snap = s.labels.tree.Clone()
	}
	return s.labels.snap
}

// labelsReady is closed once the label index is built (tests, benchmarks).
func (s *IndexedStore) labelsReady() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.labels.ready
}

// labelReadiness is a Reader that may not have its label index yet.
type labelReadiness interface{ labelIndexReady() bool }

// labelIndexReady reports whether r's label index can answer lists; a
// store that keeps every key it is given always can.
func labelIndexReady(r Reader) bool {
	lr, ok := r.(labelReadiness)
	return !ok || lr.labelIndexReady()
}

func (r indexedReader) labelIndexReady() bool { return r.labels != nil }
