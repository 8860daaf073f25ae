package raftnode

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// The raft log cache holds at most its budget in bytes: large entries are
// left to the store, reads of every entry still answer it, and a delete
// empties the cache.
func TestLogCacheIsBoundedInBytes(t *testing.T) {
	store := raft.NewInmemStore()
	c := newByteBoundedLogCache(store, 1<<20) // 1 MiB
	var logs []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 100<<10)})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if n := c.cachedBytes(); n > 1<<20 || n == 0 {
		t.Fatalf("cache holds %d bytes with a 1 MiB budget", n)
	}
	// The newest entries are the cached ones.
	if cached := c.ring[40%logCacheEntries]; cached == nil || cached.Index != 40 {
		t.Fatal("the newest entry is not cached")
	}
	if c.ring[1%logCacheEntries] != nil {
		t.Fatal("the oldest entry is still cached while newer ones were evicted")
	}
	for i := uint64(1); i <= 40; i++ {
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil || l.Index != i || len(l.Data) != 100<<10 || l.Data[0] != byte(i) {
			t.Fatalf("entry %d: %v (index %d, %d bytes)", i, err, l.Index, len(l.Data))
		}
	}
	// An entry larger than the whole budget is stored, not cached.
	huge := &raft.Log{Index: 41, Term: 1, Data: make([]byte, 2<<20)}
	before := c.cachedBytes()
	if err := c.StoreLog(huge); err != nil {
		t.Fatal(err)
	}
	if c.cachedBytes() > before {
		t.Fatalf("a 2 MiB entry entered a 1 MiB cache")
	}
	if err := c.DeleteRange(1, 41); err != nil || c.cachedBytes() != 0 {
		t.Fatalf("after DeleteRange: %v, %d bytes cached", err, c.cachedBytes())
	}
}
