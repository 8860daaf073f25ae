package raftnode

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/flowd/flowd/cluster"
)

// logCacheEntries is the cache's ring size, raft's usual 1024.
const logCacheEntries = 1024

// byteBoundedLogCache is raft.LogCache with a budget in bytes as well as in
// entries. raft's cache holds the last 1024 entries whatever their size,
// and an entry may be 8 MiB (fsm.MaxEntryWriteBytes): a node that commits
// large results kept up to gigabytes alive. Here an entry that would take
// the cache past its budget evicts the oldest cached ones first, and one
// larger than the whole budget is not cached (reads of it go to bolt), so
// the cache holds at most budget bytes and always the newest entries. Like
// raft's, it caches only what the store accepted and forgets everything on
// DeleteRange; apart from that it serves the one batch the leader is
// storing (StageLogs).
type byteBoundedLogCache struct {
	store  raft.LogStore
	budget int

	mu    sync.RWMutex
	ring  []*raft.Log
	bytes int
	// staged is the batch the leader is storing (StageLogs), consecutive
	// indexes, readable before the store has it.
	staged []*raft.Log
}

func newByteBoundedLogCache(store raft.LogStore, budget int) *byteBoundedLogCache {
	if budget <= 0 {
		budget = cluster.DefaultLogCacheBytes
	}
	return &byteBoundedLogCache{store: store, budget: budget, ring: make([]*raft.Log, logCacheEntries)}
}

func logSize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + 64 }

// IsMonotonic implements raft.MonotonicLogStore like raft's cache.
func (c *byteBoundedLogCache) IsMonotonic() bool {
	if s, ok := c.store.(raft.MonotonicLogStore); ok {
		return s.IsMonotonic()
	}
	return false
}

func (c *byteBoundedLogCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	cached := c.ring[idx%uint64(len(c.ring))]
	if cached == nil || cached.Index != idx {
		cached = nil
		if n := len(c.staged); n > 0 && idx >= c.staged[0].Index && idx <= c.staged[n-1].Index {
			cached = c.staged[idx-c.staged[0].Index]
		}
	}
	c.mu.RUnlock()
	if cached != nil {
		*log = *cached
		return nil
	}
	return c.store.GetLog(idx, log)
}

func (c *byteBoundedLogCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

func (c *byteBoundedLogCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("unable to store logs within log store: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.staged = nil
	for _, l := range logs {
		slot := l.Index % uint64(len(c.ring))
		if old := c.ring[slot]; old != nil {
			c.bytes -= logSize(old)
			c.ring[slot] = nil
		}
		sz := logSize(l)
		if sz > c.budget {
			continue // read from the store
		}
		// Make room from the oldest end of the ring (the slot after this
		// one holds the oldest index), so the cache keeps the newest.
		for i := (slot + 1) % uint64(len(c.ring)); c.bytes+sz > c.budget && i != slot; i = (i + 1) % uint64(len(c.ring)) {
			if old := c.ring[i]; old != nil {
				c.bytes -= logSize(old)
				c.ring[i] = nil
			}
		}
		c.ring[slot] = l
		c.bytes += sz
	}
	return nil
}

// StageLogs implements raft.LogStager (flowd's patch of hashicorp/raft,
// internal/hashicorp-raft): the leader's replicators read a batch of new
// entries from here while the leader stores them, so its append overlaps
// the followers'. The batch is held apart from the ring (whatever its
// size) until StoreLogs has stored it; raft stages one batch at a time, on
// its leader loop, and stores it before the next.
func (c *byteBoundedLogCache) StageLogs(logs []*raft.Log) {
	if len(logs) == 0 {
		return
	}
	c.mu.Lock()
	c.staged = logs
	c.mu.Unlock()
}

// UnstageLogs implements raft.LogStager: a batch the store refused is no
// longer readable, so nothing is served that this node does not hold.
func (c *byteBoundedLogCache) UnstageLogs([]*raft.Log) {
	c.mu.Lock()
	c.staged = nil
	c.mu.Unlock()
}

func (c *byteBoundedLogCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }
func (c *byteBoundedLogCache) LastIndex() (uint64, error)  { return c.store.LastIndex() }

func (c *byteBoundedLogCache) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	clear(c.ring)
	c.bytes = 0
	c.mu.Unlock()
	return c.store.DeleteRange(lo, hi)
}

// cachedBytes reports what the cache holds (tests, metrics).
func (c *byteBoundedLogCache) cachedBytes() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bytes
}
