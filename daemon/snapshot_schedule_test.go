package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scheduled names sort by time and are recognized only in exactly their
// form, with the agent's own id.
func TestScheduledSnapshotNames(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 18, 30, 0, 5e6, time.UTC)
	a, b := scheduledName("n1", t0), scheduledName("n1", t0.Add(time.Second))
	if a != "flowd-20261204T183000.005Z-n1.snap" || a >= b {
		t.Fatalf("names %q %q", a, b)
	}
	if !isScheduledName("n1", a) || !isScheduledName("n-1", scheduledName("n-1", t0)) {
		t.Fatalf("%q not recognized", a)
	}
	for _, n := range []string{"flowd-20261204T183000.005Z-n2.snap", "flowd-20261204T183000.005Z-n1.snap.bak", "manual.snap",
		"flowd-2026120XT183000.005Z-n1.snap", "flowd-20261204T183000Z-n1.snap", "x-flowd-20261204T183000.005Z-n1.snap"} {
		if isScheduledName("n1", n) {
			t.Errorf("%q taken for a scheduled snapshot of n1", n)
		}
	}
}

// Retention keeps the newest N of the agent's scheduled files and removes
// nothing else (files saved by hand, another agent's, a directory).
func TestPruneScheduledKeepsNAndOnlyItsOwn(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(Config{NodeID: "n1", SnapshotRetain: 2}, NewLogger("error", ""))
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	var ours []string
	for i := range 5 {
		ours = append(ours, scheduledName("n1", t0.Add(time.Duration(i)*time.Hour)))
	}
	others := []string{"manual.snap", scheduledName("n2", t0), "flowd-notatime-n1.snap"}
	for _, n := range append(slices.Clone(ours), others...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, scheduledName("n1", t0.Add(-time.Hour))), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := a.pruneScheduled(dir)
	if err != nil || !slices.Equal(removed, ours[:3]) {
		t.Fatalf("removed %v (%v), want %v", removed, err, ours[:3])
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	for _, n := range append(ours[3:], others...) {
		if !slices.Contains(left, n) {
			t.Errorf("%s was removed", n)
		}
	}
	if len(left) != 2+len(others)+1 {
		t.Errorf("left %v", left)
	}
}

func TestSnapshotScheduleConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nsnapshot_interval: 1h\nsnapshot_retain: 3\n"), 0o600)
	c, err := LoadConfigFile(p)
	if err != nil || c.SnapshotInterval != time.Hour || c.SnapshotRetain != 3 {
		t.Fatalf("%+v %v", c, err)
	}
	c = Config{NodeID: "n1", DataDir: dir}
	if err := c.Normalize(); err != nil || c.SnapshotRetain != DefaultSnapshotRetain || c.SnapshotInterval != 0 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for _, bad := range []Config{{SnapshotInterval: 10 * time.Millisecond}, {SnapshotInterval: -time.Second}, {SnapshotRetain: -1}} {
		bad.NodeID, bad.DataDir = "n1", dir
		if err := bad.Normalize(); err == nil || !strings.Contains(err.Error(), "--snapshot-") {
			t.Errorf("%+v accepted: %v", bad, err)
		}
	}
}
