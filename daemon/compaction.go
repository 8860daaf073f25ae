package daemon

import (
	"log/slog"
	"os"
	"strconv"
	"time"
)

// raftCompaction reads FLOWD_RAFT_SNAPSHOT_THRESHOLD and
// FLOWD_RAFT_TRAILING_LOGS (entries) and FLOWD_RAFT_SNAPSHOT_INTERVAL (a
// duration): when raft snapshots and compacts its log, and how many entries
// it keeps behind a snapshot for lagging followers. Unset (0): the
// cluster's defaults, 16384 entries checked every 30 s, 10240 kept. Tests
// shrink them so that a node added under load catches up by snapshot.
func raftCompaction(log *slog.Logger) (threshold, trailing uint64, interval time.Duration) {
	count := func(name string) uint64 {
		v := os.Getenv(name)
		if v == "" {
			return 0
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			log.Warn(name+" is not a positive number of log entries; using the default", "value", v)
			return 0
		}
		return n
	}
	if v := os.Getenv("FLOWD_RAFT_SNAPSHOT_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Millisecond {
			log.Warn("FLOWD_RAFT_SNAPSHOT_INTERVAL is not a duration of at least 5ms; using the default", "value", v)
		} else {
			interval = d
		}
	}
	return count("FLOWD_RAFT_SNAPSHOT_THRESHOLD"), count("FLOWD_RAFT_TRAILING_LOGS"), interval
}
