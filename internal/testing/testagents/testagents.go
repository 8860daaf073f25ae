// Package testagents starts in-process flowd agents for tests of the
// packages above daemon (rpc, worker, cmd/flowd): real raft over loopback
// TCP, real badger, Unix sockets, each agent with an HTTP listener
// (/metrics). daemon's own tests live in package daemon and cannot import
// this (it imports daemon); they keep their helper.
package testagents

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowd/flowd/cluster/raftnode"
	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// Cluster is n agents n1..nN and what reaches them.
type Cluster struct {
	Agents []*daemon.Agent
	Stops  []func() // graceful stop of each agent; safe to call twice
	Eps    []string // unix://<socket> of each agent
	Dir    string
}

// RaftNode is a's node as the raft implementation the agents here run
// on, for what tests ask of it beyond daemon.Node (WaitForLeader,
// LoopsRunning, AutoCapChanges).
func RaftNode(a *daemon.Agent) *raftnode.Node { return a.Node().(*raftnode.Node) }

// Start starts n agents (heartbeat and election timeouts 300 ms), stops
// them when the test ends, and returns once each knows a leader.
func Start(t testing.TB, n int, log *slog.Logger) *Cluster { return StartWith(t, n, log, nil) }

// StartWith is Start with tweak (if not nil) applied to each agent's
// configuration before it starts (see WithTLS).
func StartWith(t testing.TB, n int, log *slog.Logger, tweak func(*daemon.Config)) *Cluster {
	t.Helper()
	// Short socket paths: t.TempDir() can exceed the 108-byte sun_path.
	dir, err := os.MkdirTemp("", "flowd-agents-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var peers []string
	var cfgs []daemon.Config
	for i := 1; i <= n; i++ {
		raftAddr := fmt.Sprintf("127.0.0.1:%d", testutil.Port(t))
		peers = append(peers, fmt.Sprintf("n%d=%s", i, raftAddr))
		cfgs = append(cfgs, daemon.Config{NodeID: fmt.Sprintf("n%d", i), DataDir: filepath.Join(dir, fmt.Sprintf("n%d", i)),
			RaftAddr: raftAddr, ForwardAddr: fmt.Sprintf("127.0.0.1:%d", testutil.Port(t)),
			HTTPAddr: fmt.Sprintf("127.0.0.1:%d", testutil.Port(t)), Socket: filepath.Join(dir, fmt.Sprintf("n%d.sock", i)),
			HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LogLevel: "error"})
	}
	c := &Cluster{Dir: dir}
	for _, cfg := range cfgs {
		cfg.Peers = strings.Join(peers, ",")
		if tweak != nil {
			tweak(&cfg)
		}
		cfg.OpenNode = daemon.NodeOpener(raftnode.Open)
		a, err := daemon.New(cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		stop := sync.OnceFunc(func() { _ = a.Shutdown() })
		c.Agents = append(c.Agents, a)
		c.Stops = append(c.Stops, stop)
		c.Eps = append(c.Eps, "unix://"+cfg.Socket)
		t.Cleanup(stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, a := range c.Agents {
		if _, err := RaftNode(a).WaitForLeader(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh cluster raises itself to the newest state-machine version at
	// once (daemon/upgrade_fresh.go); tests start from there.
	for _, a := range c.Agents {
		for a.Node().FSM().ActiveVersion() != fsm.MaxVersion {
			if ctx.Err() != nil {
				t.Fatalf("%s: active state-machine version %d, never raised to %d", a.Config().NodeID, a.Node().FSM().ActiveVersion(), fsm.MaxVersion)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return c
}
