package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowd/flowd/rpc"
)

// A dead node is replaced under a submit/claim/complete load: n3 is killed
// and its data deleted for good, a fresh n4 joins (add-peer), and autopilot
// removes the dead n3 on its own once the replacement leaves three voters.
// No job is lost or completed twice, and n4 ends with the others' state.
func TestDeadNodeReplacedUnderLoadAutopilotRemovesIt(t *testing.T) {
	c := startCluster(t, 3)
	for _, a := range c.agents {
		a.args = append(a.args, "--autopilot-dead-server-after", "2s")
		c.replace(a, flowdBin)
	}
	c.waitLeader()
	load := startJobLoad(t, c)
	load.grow(50)

	dead := c.agents[2]
	c.kill9(dead)
	if err := os.RemoveAll(dead.dir); err != nil {
		t.Fatal(err)
	}
	load.grow(50) // two of three carry the load

	base := filepath.Dir(dead.dir)
	n4 := &agent{id: "n4", dir: filepath.Join(base, "n4"), sock: filepath.Join(base, "n4.sock"),
		raft: fmt.Sprintf("127.0.0.1:%d", freePort(t)), fwd: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	var peers []string
	for _, a := range c.agents {
		peers = append(peers, a.id+"="+a.raft)
	}
	peers = append(peers, n4.id+"="+n4.raft)
	n4.args = []string{"agent", "--node-id", n4.id, "--data-dir", n4.dir, "--raft-addr", n4.raft, "--forward-addr", n4.fwd,
		"--socket", n4.sock, "--peers", strings.Join(peers, ","), "--raft-heartbeat-timeout", "300ms",
		"--raft-election-timeout", "300ms", "--autopilot-dead-server-after", "2s"}
	c.agents = []*agent{c.agents[0], c.agents[1], n4}
	c.start(n4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ok rpc.OK
	if err := c.client(c.agents[0], c.agents[1]).CallIdempotent(ctx, rpc.MethodRaftAddPeer, rpc.PeerParams{ID: n4.id, Address: n4.raft}, &ok); err != nil {
		t.Fatalf("add n4: %v", err)
	}
	// Autopilot removes n3 once removing it leaves three voters.
	t0 := time.Now()
	for {
		var res rpc.PeersResult
		if err := c.client(c.agents[0], c.agents[1]).CallIdempotent(ctx, rpc.MethodRaftPeers, struct{}{}, &res); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range res.Peers {
			ids = append(ids, p.ID)
		}
		slices.Sort(ids)
		if slices.Equal(ids, []string{"n1", "n2", "n4"}) {
			t.Logf("autopilot removed the dead n3 %v after n4 joined", time.Since(t0).Round(time.Millisecond))
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("members after 60s: %v (autopilot did not remove the dead n3)", ids)
		}
		time.Sleep(100 * time.Millisecond) // polling external processes
	}
	load.grow(50) // the replacement carries its share
	for {         // autopilot's view follows within its update interval (1 s)
		var st rpc.AutopilotState
		err := c.client(n4).CallIdempotent(ctx, rpc.MethodAutopilotState, struct{}{}, &st)
		if err == nil && st.Healthy && st.FailureTolerance == 1 && len(st.Servers) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("autopilot state after 60s: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond) // polling external processes
	}
	n := load.end()
	sameState(t, c)
	t.Logf("%d jobs through the replacement, none lost or doubled", n)
}
