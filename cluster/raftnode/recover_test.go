package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// A survivor of a lost majority is recovered offline, with its state intact
// and (on a copy of its data dir) with its state dir deleted: both end with
// the same state at the same index, holding every run the old cluster
// committed and the entry it appended but could not commit; the node then
// starts alone as leader and takes writes. With compaction the copy is
// rebuilt from a snapshot plus the log after it; without, from the whole log.
func TestRecoverFromALostMajority(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compact=%v", compact), func(t *testing.T) {
			c := NewTestCluster(t, 3, func(cfg *Config) {
				cfg.DisableLoops, cfg.DigestInterval = true, -1
				if compact {
					cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = 32, 20*time.Millisecond, 8
				}
			})
			spec := mustSpec(t, `{"tasks":[{"key":"a","type":"t"}]}`)
			var ids []string
			for i := range 60 {
				id := fmt.Sprintf("r%03d", i)
				c.Propose(&fsm.Submit{ID: id, Spec: spec})
				ids = append(ids, id)
			}
			leader := c.Leader()
			if compact {
				waitSnapshot(t, leader)
			}
			// Cut the leader off and propose once more: it appends the
			// entry to its own log but cannot commit it.
			c.Partition(leader)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, _, err := leader.Propose(ctx, &fsm.Submit{ID: "tail", Spec: spec})
			cancel()
			// Lost leadership with the entry in flight: raft had appended
			// it (a timeout or a refusal says nothing of the kind).
			tailAppended := err != nil && strings.Contains(err.Error(), cluster.ErrLeadershipLost.Error())
			t.Logf("proposal without quorum: %v (appended: %v)", err, tailAppended)
			i := c.Index(leader)
			cfg := c.config(i, nil)
			for _, n := range c.Nodes {
				if n != nil {
					c.Kill(n)
				}
			}

			lost := filepath.Join(t.TempDir(), "copy")
			copyDir(t, cfg.DataDir, lost)
			if err := os.RemoveAll(filepath.Join(lost, "state")); err != nil {
				t.Fatal(err)
			}
			info, err := Inspect(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Servers) != 3 || info.LastIndex == 0 || info.LastIndex < info.AppliedIndex || info.LogStore != cluster.DefaultLogStore {
				t.Fatalf("inspect: %+v", info)
			}
			res, err := Recover(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			lostCfg := cfg
			lostCfg.DataDir = lost
			resLost, err := Recover(lostCfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("recovered: %+v; from the copy without state: replayed %d", res, resLost.Replayed)
			if res.AppliedIndex != info.LastIndex || resLost.AppliedIndex != info.LastIndex {
				t.Fatalf("applied %d and %d after recovery, want the log's last index %d", res.AppliedIndex, resLost.AppliedIndex, info.LastIndex)
			}
			if len(res.Servers) != 1 || res.Servers[0].ID != cfg.NodeID {
				t.Fatalf("new configuration %+v, want %s alone", res.Servers, cfg.NodeID)
			}
			d1, d2 := offlineDigest(t, cfg), offlineDigest(t, lostCfg)
			if d1 != d2 {
				t.Fatal("the recovered state differs from a rebuild of the same log: an entry was applied twice or lost")
			}
			if _, err := Recover(cfg, []cluster.Peer{{ID: "other", Address: "x:1"}}); err == nil {
				t.Fatal("a configuration without this node was accepted")
			}

			c.Heal()
			n := c.Restart(i)
			if l := c.Leader(); l != n {
				t.Fatalf("leader %s, want the recovered %s", l.ID(), n.ID())
			}
			if peers := n.Servers(); len(peers) != 1 || peers[0].ID != n.ID() {
				t.Fatalf("configuration after start: %+v", peers)
			}
			if tailAppended {
				ids = append(ids, "tail")
			}
			for _, id := range ids {
				if _, _, err := n.FSM().GetRun(id); err != nil {
					t.Fatalf("run %s after recovery: %v", id, err)
				}
			}
			if _, idx := c.Propose(&fsm.Submit{ID: "after", Spec: spec}); idx <= res.AppliedIndex {
				t.Fatalf("write after recovery at index %d, not after %d", idx, res.AppliedIndex)
			}
		})
	}
}

// Two survivors recovered into one configuration of the two (the same list
// on each): they elect one, the other is brought to its state (their
// recovered logs may differ in the old leader's uncommitted tail), and the
// pair takes writes.
func TestRecoverTwoSurvivorsIntoOneConfiguration(t *testing.T) {
	c := NewTestCluster(t, 3, func(cfg *Config) { cfg.DisableLoops, cfg.DigestInterval = true, -1 })
	spec := mustSpec(t, `{"tasks":[{"key":"a","type":"t"}]}`)
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("r%03d", i)
		c.Propose(&fsm.Submit{ID: id, Spec: spec})
		ids = append(ids, id)
	}
	leader := c.Leader()
	c.WaitForApplied(leader.FSM().AppliedIndex())
	c.Partition(leader)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, _, _ = leader.Propose(ctx, &fsm.Submit{ID: "tail", Spec: spec}) // appended, not committed
	cancel()
	keep := []int{c.Index(leader), (c.Index(leader) + 1) % 3}
	var servers []cluster.Peer
	for _, i := range keep {
		servers = append(servers, cluster.Peer{ID: fmt.Sprintf("n%d", i+1), Address: string(c.addrs[i])})
	}
	for _, n := range c.Nodes {
		if n != nil {
			c.Kill(n)
		}
	}
	for _, i := range keep {
		if _, err := Recover(c.config(i, nil), servers); err != nil {
			t.Fatal(err)
		}
	}
	c.Heal()
	for _, i := range keep {
		c.Restart(i)
	}
	digests := c.Converged()
	if len(digests) != 2 || digests[servers[0].ID] != digests[servers[1].ID] {
		t.Fatalf("digests after recovery: %v", digests)
	}
	for _, i := range keep {
		n := c.Nodes[i]
		if peers := n.Servers(); len(peers) != 2 {
			t.Fatalf("%s: configuration %+v", n.ID(), peers)
		}
		for _, id := range ids {
			if _, _, err := n.FSM().GetRun(id); err != nil {
				t.Fatalf("%s: run %s: %v", n.ID(), id, err)
			}
		}
	}
	_, _, err := c.Leader().FSM().GetRun("tail")
	t.Logf("leader %s; the old leader's uncommitted entry kept: %v", c.Leader().ID(), err == nil)
}

// Recover refuses a data dir another process holds open.
func TestRecoverRefusesARunningNode(t *testing.T) {
	c := NewTestCluster(t, 1, func(cfg *Config) { cfg.DisableLoops = true })
	cfg := c.config(0, nil)
	_, err := Recover(cfg, nil)
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("recover of a running node's data dir: %v, want ErrDataDirInUse", err)
	}
	if _, err := Recover(Config{Config: cluster.Config{NodeID: "n1", DataDir: t.TempDir()}}, nil); err == nil {
		t.Fatal("recover of an empty dir succeeded")
	}
}

func waitSnapshot(t *testing.T, n *Node) {
	t.Helper()
	// raft's snapshot timer
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, "a snapshot and compaction (without them the compacted case would test nothing)", func() error {
		metas, _ := n.cfg.SnapshotStore.List()
		if len(metas) == 0 {
			return errors.New("no snapshot")
		}
		if first, _ := n.cfg.LogStore.FirstIndex(); first <= 1 {
			return fmt.Errorf("a snapshot, but the log still starts at %d", first)
		}
		return nil
	})
}

func offlineDigest(t *testing.T, cfg Config) string {
	t.Helper()
	n, err := offlineNode(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer n.closeAll()
	d, _, err := n.fsm.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadPeersFile(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "peers.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadPeersFile(write(`[{"id":"n1","address":"10.0.0.1:7001"},{"id":"n2","address":"10.0.0.2:7001","non_voter":false}]`))
	if err != nil || len(got) != 2 || got[1] != (cluster.Peer{ID: "n2", Address: "10.0.0.2:7001"}) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{`[]`, `[{"id":"n1","address":"10.0.0.1:7001"},{"id":"n1","address":"10.0.0.2:7001"}]`,
		`[{"id":"n1"}]`, `[{"id":"n1","address":"nohost"}]`, `[{"id":"n1","address":"10.0.0.1:7001","role":"x"}]`} {
		if _, err := ReadPeersFile(write(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
