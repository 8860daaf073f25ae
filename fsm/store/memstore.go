package store

import (
	"bytes"
	"sync"
)

// MemStore is an in-memory Store for fast tests and tooling. Views are
// copy-on-write clones, so a view is a true point-in-time snapshot.
type MemStore struct {
	mu    sync.Mutex
	items *Tree
}

// NewMemStore returns an empty in-memory store.
func NewMemStore() *MemStore {
	return &MemStore{items: NewTree()}
}

// View implements Store.
func (m *MemStore) View() (Reader, func(), error) {
	m.mu.Lock()
	c := m.items.Clone()
	m.mu.Unlock()
	return c, func() {}, nil
}

// Commit implements Store.
func (m *MemStore) Commit(batches [][]Write) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range batches {
		for _, w := range b {
			if w.Val == nil {
				m.items.Delete(w.Key)
			} else {
				m.items.Put(bytes.Clone(w.Key), bytes.Clone(w.Val))
			}
		}
	}
	return nil
}

// Replace implements Store.
func (m *MemStore) Replace(load func(put func(k, v []byte) error) error) error {
	fresh := NewTree()
	if err := load(func(k, v []byte) error {
		fresh.Put(bytes.Clone(k), bytes.Clone(v))
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
