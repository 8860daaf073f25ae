package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
)

// Peer is one member of the initial configuration.
type Peer struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// ParsePeers parses "n1=host:port,n2=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q must look like id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %s: address %q: %v", id, addr, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %s is listed twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Address: addr})
	}
	return out, nil
}

// DefaultCommitTimeout is how long the leader's replication to a follower
// idles before it sends an AppendEntries anyway (raft's CommitTimeout; the
// wait is randomised between 1x and 2x). It costs an idle cluster one
// round trip per follower per wait, and is how late a follower learns the
// last commit once traffic stops; it never delays a commit on the leader
// (new entries are sent at once). See DESIGN.md, "Idle cost".
const DefaultCommitTimeout = 100 * time.Millisecond

// Config configures a node: what the agent decides (identity, addresses,
// peers, TLS, timing, sizes). Zero timings take production defaults. The
// implementation's own test hooks are in raftnode.Config, which embeds this.
type Config struct {
	NodeID    string
	DataDir   string
	RaftBind  string // raft TCP listen address
	Advertise string // address peers dial; defaults to RaftBind
	Peers     []Peer // initial configuration (bootstrap); empty = just this node
	Logger    *slog.Logger
	// TLS, when set, runs raft over mutual TLS (raftnode/tls.go): peers must hold a
	// certificate from the cluster CA naming a member of the current
	// configuration. Nil: plaintext TCP (the daemon allows that only on
	// loopback or with --insecure-plaintext).
	TLS TLSProvider
	// Meta is published in the replicated state (fsm.NodeInfo) whenever
	// this node becomes leader: its forwarding and client addresses.
	Meta map[string]string

	// Raft's failure-detection timing (timing.go): zero timeouts are the
	// base values times RaftMultiplier (0: DefaultRaftMultiplier), the
	// leader lease the heartbeat timeout.
	RaftMultiplier     float64
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// LogCacheBytes bounds the memory of the cache of recent raft log
	// entries (0: DefaultLogCacheBytes).
	LogCacheBytes int
	// RaftLogStore is the raft log store a new data dir is created with:
	// LogStoreBolt or LogStoreWAL ("": DefaultLogStore). A data dir that
	// already holds a log keeps its store whatever this says
	// (raftnode/logstore.go).
	RaftLogStore string
	// StateCacheBytes is the state store's block cache (0: the store's
	// default, 32 MiB).
	StateCacheBytes int64
	// StateWriteWindow is how long the state store keeps applied commits in
	// memory before writing them out as one transaction (fsm/store
	// WriteBehind): 0 is store.DefaultWriteBehindAge, negative writes every
	// commit through at once.
	StateWriteWindow time.Duration
	// FollowerApplyNice is how much a follower's apply thread's nice value
	// is raised above the agent's, on Linux (raftnode/applythread.go): 0 is
	// raftnode.DefaultFollowerApplyNice, negative applies at the agent's
	// priority.
	FollowerApplyNice int
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// MinFreeBytes: below this much free space on the data dir's file
	// system the node stops cleanly (raftnode/storage.go). 0: DefaultMinFreeBytes;
	// negative: never.
	MinFreeBytes int64
	// DigestInterval is how often the leader proposes a digest check
	// (raftnode/digestcheck.go) while entries are being applied. 0:
	// DefaultDigestInterval; negative: never.
	DigestInterval time.Duration

	// AutoPeriod and AutoWindow are the adaptive concurrency controller's
	// period and latency window (raftnode/autoconc.go; 0: 1 s and 10 s).
	AutoPeriod, AutoWindow time.Duration

	// CallerOf identifies the client connection a proposal's context comes
	// from: a comparable value, the same for every call on one connection
	// (nil: unknown). The group commit lingers only for callers it answered
	// coming back (raftnode/batcher.go); nil treats every caller so.
	CallerOf func(context.Context) any
}

// The raft log stores (Config.RaftLogStore).
const (
	// LogStoreBolt is raft-boltdb: log and stable store in raft/raft.db.
	LogStoreBolt = "bolt"
	// LogStoreWAL is raft-wal's segment files in raft/wal (one fsync per
	// append), with raft-boltdb as the stable store in raft/stable.db.
	LogStoreWAL = "wal"
	// DefaultLogStore is what a new data dir gets: wal, measured about
	// twice as fast as bolt per append (raftnode/DESIGN.md, "The raft log
	// store").
	DefaultLogStore = LogStoreWAL
)

// CheckLogStore validates a --raft-log-store value ("" is the default).
func CheckLogStore(s string) error {
	switch s {
	case "", LogStoreBolt, LogStoreWAL:
		return nil
	}
	return fmt.Errorf("--raft-log-store %q must be %s or %s (default %s)", s, LogStoreWAL, LogStoreBolt, DefaultLogStore)
}

// DefaultLogCacheBytes bounds the raft log cache's memory (Config).
const DefaultLogCacheBytes = 64 << 20

// DefaultMinFreeBytes is the free space below which the node stops (see
// Config.MinFreeBytes): badger maps its memtables (64 MiB each, two) into
// memory, and a page of them that the file system cannot back once the disk
// is full is a SIGBUS crash, not an error. Stopping before that is a clean,
// logged stop.
const DefaultMinFreeBytes = 128 << 20

// DefaultDigestInterval is how often a busy cluster checks its digests.
const DefaultDigestInterval = time.Minute
