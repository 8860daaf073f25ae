package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFileDurationsAndUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nshutdown_timeout: 5s\nraft_heartbeat_timeout: 300ms\n"), 0o600)
	c, err := LoadConfigFile(p)
	if err != nil || c.ShutdownTimeout != 5*time.Second || c.HeartbeatTimeout != 300*time.Millisecond || c.NodeID != "n1" {
		t.Fatalf("%+v %v", c, err)
	}
	os.WriteFile(p, []byte("node_id: n1\nraft_adress: x\n"), 0o600)
	if _, err := LoadConfigFile(p); err == nil || !strings.Contains(err.Error(), "raft_adress") {
		t.Fatalf("unknown key accepted: %v", err)
	}
	// Flags (over) win over the file.
	merged := Config{NodeID: "file", DataDir: "/d"}.Merge(Config{NodeID: "flag"})
	if merged.NodeID != "flag" || merged.DataDir != "/d" {
		t.Fatalf("merge: %+v", merged)
	}
}

func TestNormalizeListsEveryProblem(t *testing.T) {
	c := Config{RaftAddr: "nonsense", Peers: "n1", LogLevel: "loud"}
	err := c.Normalize()
	for _, want := range []string{"--node-id", "--data-dir", "--raft-addr", "--peers", "--log-level"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("missing %s in %v", want, err)
		}
	}
	c = Config{NodeID: "n1", DataDir: "/d", RaftAddr: "0.0.0.0:7001", RaftAdvertise: "10.0.0.5:7001", ForwardAddr: "0.0.0.0:9999"}
	if err := c.Normalize(); err != nil || c.ForwardAdvertise != "10.0.0.5:9999" || c.Socket != "/d/flowd.sock" {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestCommitTimeoutFromFileFlagsAndBounds(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nraft_commit_timeout: 40ms\n"), 0o600)
	c, err := LoadConfigFile(p)
	if err != nil || c.CommitTimeout != 40*time.Millisecond {
		t.Fatalf("%+v %v", c, err)
	}
	if m := c.Merge(Config{CommitTimeout: 20 * time.Millisecond}); m.CommitTimeout != 20*time.Millisecond {
		t.Fatalf("flag did not win: %v", m.CommitTimeout)
	}
	if m := c.Merge(Config{}); m.CommitTimeout != 40*time.Millisecond {
		t.Fatalf("unset flag overrode the file: %v", m.CommitTimeout)
	}
	for _, d := range []time.Duration{0, time.Millisecond, readFenceWait / 2} {
		c := Config{NodeID: "n1", DataDir: "/d", CommitTimeout: d}
		if err := c.Normalize(); err != nil {
			t.Fatalf("%v rejected: %v", d, err)
		}
	}
	// Past readFenceWait/2 a read behind the fence could time out before a
	// quiet follower learns the commit; below 1ms raft refuses to start.
	for _, d := range []time.Duration{-time.Millisecond, 500 * time.Microsecond, readFenceWait/2 + time.Millisecond} {
		c := Config{NodeID: "n1", DataDir: "/d", CommitTimeout: d}
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "--raft-commit-timeout") {
			t.Fatalf("%v accepted: %v", d, err)
		}
	}
}

func TestRaftMultiplierFromFileFlagsOverridesAndBounds(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nraft_multiplier: 3\nraft_leader_lease_timeout: 1s\n"), 0o600)
	c, err := LoadConfigFile(p)
	if err != nil || c.RaftMultiplier != 3 || c.LeaderLeaseTimeout != time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	if m := c.Merge(Config{}); m.RaftMultiplier != 3 || m.LeaderLeaseTimeout != time.Second {
		t.Fatalf("unset flags overrode the file: %+v", m)
	}
	m := c.Merge(Config{RaftMultiplier: 2, HeartbeatTimeout: 1500 * time.Millisecond})
	if err := m.Normalize(); err != nil {
		t.Fatal(err)
	}
	// The flag's multiplier wins over the file's; the explicit heartbeat
	// and the file's lease win over the scaled ones.
	if m.RaftMultiplier != 2 || m.HeartbeatTimeout != 1500*time.Millisecond || m.ElectionTimeout != 1500*time.Millisecond || m.LeaderLeaseTimeout != time.Second {
		t.Fatalf("resolved %+v", m.RaftTiming())
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{RaftMultiplier: 20}, "--raft-multiplier 20 must be between"},
		{Config{LeaderLeaseTimeout: time.Hour}, "--raft-leader-lease-timeout 1h0m0s must not be longer than --raft-heartbeat-timeout"},
		{Config{HeartbeatTimeout: 3 * time.Second, ElectionTimeout: time.Second}, "--raft-election-timeout 1s must not be shorter than --raft-heartbeat-timeout 3s"},
	} {
		tc.c.NodeID, tc.c.DataDir = "n1", "/d"
		if err := tc.c.Normalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c.RaftTiming(), err, tc.want)
		}
	}
}

func TestRaftLogStoreFromFileFlagsAndValues(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nraft_log_store: bolt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfigFile(p)
	if err != nil || c.RaftLogStore != "bolt" {
		t.Fatalf("%+v %v", c, err)
	}
	if m := c.Merge(Config{}); m.RaftLogStore != "bolt" {
		t.Fatalf("an unset flag overrode the file: %q", m.RaftLogStore)
	}
	m := c.Merge(Config{RaftLogStore: "wal"})
	if err := m.Normalize(); err != nil || m.RaftLogStore != "wal" {
		t.Fatalf("the flag did not win: %q %v", m.RaftLogStore, err)
	}
	for _, ok := range []string{"", "wal", "bolt"} {
		c := Config{NodeID: "n1", DataDir: "/d", RaftLogStore: ok}
		if err := c.Normalize(); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	c = Config{NodeID: "n1", DataDir: "/d", RaftLogStore: "boltdb"}
	if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), `--raft-log-store "boltdb" must be wal or bolt`) {
		t.Fatalf("boltdb accepted: %v", err)
	}
}

func TestFollowerApplyNiceFromFileFlagsAndBounds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nfollower_apply_nice: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfigFile(p)
	if err != nil || c.FollowerApplyNice == nil || *c.FollowerApplyNice != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	// The file's 0 is "not lowered", not "the default".
	if m := c.Merge(Config{}); m.followerApplyNice() >= 0 {
		t.Fatalf("the file's 0 became %d (cluster.Config: 0 default, negative off)", m.followerApplyNice())
	}
	five := 5
	if m := c.Merge(Config{FollowerApplyNice: &five}); m.followerApplyNice() != 5 {
		t.Fatalf("the flag did not win: %d", m.followerApplyNice())
	}
	if d := (&Config{}).followerApplyNice(); d != 0 {
		t.Fatalf("unset: %d, want 0 (cluster's default)", d)
	}
	for _, bad := range []int{-1, 20} {
		c := Config{NodeID: "n1", DataDir: "/d", FollowerApplyNice: &bad}
		if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "--follower-apply-nice") {
			t.Errorf("%d accepted: %v", bad, err)
		}
	}
	for _, ok := range []int{0, 10, 19} {
		c := Config{NodeID: "n1", DataDir: "/d", FollowerApplyNice: &ok}
		if err := c.Normalize(); err != nil {
			t.Errorf("%d rejected: %v", ok, err)
		}
	}
}

// What the agent makes of each state write window a config holds: unset is
// cluster's default (0), a written 0 writes every commit at once
// (negative), anything else is the window; the file's durations are read
// as the flags write them, and a negative one is refused.
func TestStateWriteWindowSettings(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.yaml")
	for _, tc := range []struct {
		written string
		want    time.Duration
	}{{"0s", -1}, {"0", -1}, {`"0"`, -1}, {"250ms", 250 * time.Millisecond}} {
		if err := os.WriteFile(p, []byte("node_id: n1\ndata_dir: /tmp/x\nstate_write_window: "+tc.written+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfigFile(p)
		if err != nil {
			t.Fatalf("%s: %v", tc.written, err)
		}
		if m := c.Merge(Config{}); m.stateWriteWindow() != tc.want {
			t.Errorf("file %s: the agent's window %v, want %v", tc.written, m.stateWriteWindow(), tc.want)
		}
	}
	if d := (&Config{}).stateWriteWindow(); d != 0 {
		t.Fatalf("unset: %v, want 0 (cluster's default)", d)
	}
	file, flag := 250*time.Millisecond, time.Duration(0)
	fromFile := Config{StateWriteWindow: &file}
	if m := fromFile.Merge(Config{StateWriteWindow: &flag}); m.stateWriteWindow() >= 0 {
		t.Fatalf("the flag's 0 did not win over the file's 250ms: %v", m.stateWriteWindow())
	}
	bad := -time.Second
	c := Config{NodeID: "n1", DataDir: "/d", StateWriteWindow: &bad}
	if err := c.Normalize(); err == nil || !strings.Contains(err.Error(), "--state-write-window") {
		t.Errorf("-1s accepted: %v", err)
	}
}
