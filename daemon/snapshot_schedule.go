package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Scheduled snapshots (--snapshot-interval, --snapshot-retain): every agent
// started with an interval writes a snapshot of its own state into its
// --snapshot-dir on that interval and keeps the newest --snapshot-retain
// of the files it wrote so (DESIGN.md, "Scheduled snapshots", says why
// every agent and not only the leader). The names are
//
//	flowd-20261204T183000.000Z-n1.snap
//
// (UTC time of the snapshot, then the node id): they sort by time, and
// retention touches only names of exactly that form with this node's id,
// never a file saved by hand or by another agent sharing the directory.

const (
	// DefaultSnapshotRetain is --snapshot-retain when unset.
	DefaultSnapshotRetain = 24
	// MinSnapshotInterval is the shortest --snapshot-interval.
	MinSnapshotInterval = time.Second

	scheduledPrefix = "flowd-"
	scheduledLayout = "20060102T150405.000Z"
)

// snapshotSchedule is the scheduler's state the metrics read.
type snapshotSchedule struct {
	lastOK   atomic.Int64 // Unix ms of the last successful scheduled snapshot (0: none)
	ok, fail atomic.Uint64
}

// scheduledName is the file name of a scheduled snapshot taken at t.
func scheduledName(node string, t time.Time) string {
	return scheduledPrefix + t.UTC().Format(scheduledLayout) + "-" + node + ".snap"
}

// isScheduledName reports whether name is a scheduled snapshot of node's.
func isScheduledName(node, name string) bool {
	rest, ok := strings.CutPrefix(name, scheduledPrefix)
	if !ok {
		return false
	}
	stamp, ok := strings.CutSuffix(rest, "-"+node+".snap")
	if !ok || len(stamp) != len(scheduledLayout) {
		return false
	}
	_, err := time.Parse(scheduledLayout, stamp)
	return err == nil
}

// runSnapshotSchedule takes a snapshot every --snapshot-interval until ctx
// ends.
func (a *Agent) runSnapshotSchedule(ctx context.Context) {
	a.log.Info("scheduled snapshots on", "interval", a.cfg.SnapshotInterval, "retain", a.cfg.SnapshotRetain, "dir", a.cfg.SnapshotDir)
	tick := time.NewTicker(a.cfg.SnapshotInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			_ = a.takeScheduledSnapshot(now)
		}
	}
}

// takeScheduledSnapshot writes one scheduled snapshot, then removes the
// oldest scheduled ones beyond --snapshot-retain. Both are logged.
func (a *Agent) takeScheduledSnapshot(now time.Time) error {
	dir := a.cfg.SnapshotDir
	name := scheduledName(a.cfg.NodeID, now)
	start := time.Now()
	w, err := a.writeSnapshotFile("scheduled snapshot", dir, filepath.Join(dir, name))
	if err != nil {
		a.snapSched.fail.Add(1)
		a.log.Warn("scheduled snapshot failed; the next is due in one interval", "file", name, "err", err,
			"dir", dir, "hint", "check the directory's space and permissions")
		return err
	}
	a.snapSched.ok.Add(1)
	a.snapSched.lastOK.Store(time.Now().UnixMilli())
	removed, perr := a.pruneScheduled(dir)
	a.log.Info("scheduled snapshot", "file", w.path, "bytes", w.bytes, "applied_index", w.index, "sha256", w.sha256,
		"ms", time.Since(start).Milliseconds(), "removed", removed)
	if perr != nil {
		a.log.Warn("scheduled snapshot retention failed", "dir", dir, "err", perr)
	}
	return nil
}

// pruneScheduled removes this node's scheduled snapshots beyond the newest
// --snapshot-retain, returning the names it removed. Only regular files
// with a scheduled name of this node's are counted or removed.
func (a *Agent) pruneScheduled(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ours []string
	for _, e := range ents {
		if e.Type().IsRegular() && isScheduledName(a.cfg.NodeID, e.Name()) {
			ours = append(ours, e.Name())
		}
	}
	slices.Sort(ours) // oldest first: the names sort by time
	var removed []string
	var firstErr error
	for len(ours) > a.cfg.SnapshotRetain {
		if err := os.Remove(filepath.Join(dir, ours[0])); err != nil && firstErr == nil {
			firstErr = err
		} else if err == nil {
			removed = append(removed, ours[0])
		}
		ours = ours[1:]
	}
	return removed, firstErr
}
