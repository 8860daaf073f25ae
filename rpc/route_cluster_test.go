package rpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/internal/testing/testagents"
	"github.com/flowd/flowd/rpc"
)

// Leader routing against three real agents (raft, badger, sockets),
// observed through each agent's flowd_rpc_requests_total: the requests it
// received from clients (what followers forward to the leader is not
// counted there).

func startAgents(t *testing.T) []*daemon.Agent { return testagents.Start(t, 3, nil).Agents }

var submitLine = regexp.MustCompile(`^flowd_rpc_requests_total\{.*method="run.submit".*\} (\S+)$`)

// submits is how many run.submit requests each agent received from
// clients, by node id.
func submits(t *testing.T, agents []*daemon.Agent) map[string]int {
	t.Helper()
	out := map[string]int{}
	hc := http.Client{Timeout: 5 * time.Second}
	for _, a := range agents {
		resp, err := hc.Get("http://" + a.Config().HTTPAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if m := submitLine.FindStringSubmatch(sc.Text()); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				out[a.Config().NodeID] += int(v)
			}
		}
		resp.Body.Close()
	}
	return out
}

func leaderOf(agents []*daemon.Agent) (*daemon.Agent, uint64) {
	var who *daemon.Agent
	var changes uint64
	for _, a := range agents {
		changes += a.Node().LeaderChanges()
		if a.Node().IsLeader() {
			who = a
		}
	}
	return who, changes
}

// submitN submits n runs and returns who led throughout (nil if the leader
// changed meanwhile) and how many submits each agent received.
func submitN(t *testing.T, c *rpc.Client, agents []*daemon.Agent, n int) (*daemon.Agent, map[string]int) {
	t.Helper()
	before := submits(t, agents)
	l0, c0 := leaderOf(agents)
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	after := submits(t, agents)
	for id := range after {
		after[id] -= before[id]
	}
	if l1, c1 := leaderOf(agents); l1 != l0 || c1 != c0 {
		return nil, after
	}
	return l0, after
}

func onlyOn(leader *daemon.Agent, got map[string]int, n int) bool {
	for id, v := range got {
		want := 0
		if id == leader.Config().NodeID {
			want = n
		}
		if v != want {
			return false
		}
	}
	return true
}

// A client given all three endpoints submits to the leader only; after an
// operator moves leadership (the old leader stays up, forwarding), it
// re-routes to the new leader and every call succeeds meanwhile.
func TestClientFollowsALeadershipTransfer(t *testing.T) {
	agents := startAgents(t)
	var eps []string
	for _, a := range agents {
		eps = append(eps, "unix://"+a.Config().Socket)
	}
	c, err := rpc.NewClient(eps, rpc.ClientOptions{LeaderCheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	leader, got := submitN(t, c, agents, 3)
	if leader != nil && !onlyOn(leader, got, 3) {
		t.Fatalf("leader %s, submits received: %v", leader.Config().NodeID, got)
	}
	if leader == nil {
		t.Logf("the leader changed during the first phase (%v): not asserting it", got)
		leader, _ = leaderOf(agents)
	}
	var target *daemon.Agent
	for _, a := range agents {
		if a != leader {
			target = a
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Raw(ctx, rpc.MethodRaftTransfer, json.RawMessage(`{"id":"`+target.Config().NodeID+`"}`)); err != nil {
		t.Fatal(err)
	}
	// Writes keep succeeding; the client notices the change (it asks again
	// after a transfer it made, after a -32004 from the old leader during
	// the hand-over, and every LeaderCheck) and re-routes.
	for n := 0; ; n++ {
		if node, _ := c.Leader(); node == target.Config().NodeID {
			t.Logf("re-routed to %s after %d submits", node, n)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("still routing to %v", func() string { n, _ := c.Leader(); return n }())
		}
		if _, err := c.RunSubmit(ctx, rpc.SubmitParams{Workflow: json.RawMessage(`{"tasks":[{"key":"a","type":"t"}]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if leader, got := submitN(t, c, agents, 3); leader == nil || leader != target || !onlyOn(target, got, 3) {
		t.Fatalf("after the transfer to %s: submits received %v", target.Config().NodeID, got)
	}
}
