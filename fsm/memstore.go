package fsm

import (
	"bytes"
	"sync"

	"github.com/google/btree"
)

// MemStore is an in-memory Store for fast tests and tooling. Views are
// copy-on-write clones, so a view is a true point-in-time snapshot.
type MemStore struct {
	mu    sync.Mutex
	items *btree.BTreeG[item]
}

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	return &MemStore{items: btree.NewG(8, itemLess)}
}

// View implements Store.
func (m *MemStore) View() (Reader, func(), error) {
	m.mu.Lock()
	c := m.items.Clone()
	m.mu.Unlock()
	return memReader{c}, func() {}, nil
}

// Commit implements Store.
func (m *MemStore) Commit(batches [][]Write) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range batches {
		for _, w := range b {
			if w.Val == nil {
				m.items.Delete(item{key: w.Key})
			} else {
				m.items.ReplaceOrInsert(item{key: bytes.Clone(w.Key), val: bytes.Clone(w.Val)})
			}
		}
	}
	return nil
}

// Replace implements Store.
func (m *MemStore) Replace(load func(put func(k, v []byte) error) error) error {
	fresh := btree.NewG(8, itemLess)
	if err := load(func(k, v []byte) error {
		fresh.ReplaceOrInsert(item{key: bytes.Clone(k), val: bytes.Clone(v)})
		return nil
	}); err != nil {
		return err
	}
	m.mu.Lock()
	m.items = fresh
	m.mu.Unlock()
	return nil
}

// Sync implements Store; memory is as durable as it gets.
func (m *MemStore) Sync() error { return nil }

// Close implements Store.
func (m *MemStore) Close() error { return nil }

type memReader struct{ t *btree.BTreeG[item] }

func (r memReader) Get(key []byte) ([]byte, bool, error) {
	it, ok := r.t.Get(item{key: key})
	return it.val, ok, nil
}

func (r memReader) Scan(prefix, start []byte, reverse bool, fn func(k, v []byte) bool) error {
	o := &overlay{items: r.t}
	o.walk(prefix, start, reverse, func(it item) bool { return fn(it.key, it.val) })
	return nil
}

func (r memReader) mayHavePrefix(prefix []byte) bool { return firstWithPrefix(r.t, prefix) }
