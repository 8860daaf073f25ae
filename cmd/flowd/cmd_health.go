package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, healthCommand) }

var healthCommand = &cli.Command{
	Name:  "health",
	Usage: "ask every agent of --addr for its view of the cluster",
	Description: "Calls cluster.status on each endpoint separately. Exits 0 if every reachable\n" +
		"agent agrees on one leader, 1 otherwise (or if none is reachable).",
	Action: healthAction,
}

// nodeHealth is one endpoint's answer.
type nodeHealth struct {
	Endpoint     string `json:"endpoint"`
	Reachable    bool   `json:"reachable"`
	Error        string `json:"error,omitempty"`
	Node         string `json:"node,omitempty"`
	State        string `json:"state,omitempty"`
	Leader       string `json:"leader,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	CommitIndex  uint64 `json:"commit_index,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	Peers        int    `json:"peers,omitempty"`
	Version      string `json:"version,omitempty"`
}

type healthReport struct {
	Healthy bool         `json:"healthy"`
	Leader  string       `json:"leader,omitempty"`
	Problem string       `json:"problem,omitempty"`
	Nodes   []nodeHealth `json:"nodes"`
}

func probe(ctx context.Context, ep string, timeout time.Duration) nodeHealth {
	h := nodeHealth{Endpoint: ep}
	c, err := rpc.NewClient([]string{ep}, rpc.ClientOptions{MaxAttempts: 1, DialTimeout: min(timeout, 2*time.Second), Logger: discardLogger})
	if err != nil {
		h.Error = err.Error()
		return h
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		h.Error = err.Error()
		return h
	}
	h.Reachable = true
	h.Node, h.State, h.Leader, h.Term = st.NodeID, strings.ToLower(st.State), st.LeaderID, st.Term
	h.CommitIndex, h.AppliedIndex, h.Peers, h.Version = st.CommitIndex, st.AppliedIndex, len(st.Peers), st.Version
	return h
}

func checkHealth(cCtx *cli.Context) healthReport {
	eps := endpoints(cCtx)
	rep := healthReport{Nodes: make([]nodeHealth, len(eps))}
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { rep.Nodes[i] = probe(cCtx.Context, ep, callTimeout(cCtx)) })
	}
	wg.Wait()
	leaders := map[string][]string{}
	reachable := 0
	for _, n := range rep.Nodes {
		if n.Reachable {
			reachable++
			leaders[n.Leader] = append(leaders[n.Leader], n.Node)
		}
	}
	switch {
	case reachable == 0:
		rep.Problem = "no agent is reachable"
	case len(leaders) > 1:
		var views []string
		for l, ns := range leaders {
			views = append(views, fmt.Sprintf("%s say %s", strings.Join(ns, ","), dash(l)))
		}
		rep.Problem = "the agents disagree on the leader: " + strings.Join(views, "; ")
	default:
		for l := range leaders {
			rep.Leader = l
		}
		if rep.Leader == "" {
			rep.Problem = "no leader: the cluster may have lost its quorum"
		}
	}
	rep.Healthy = rep.Problem == ""
	return rep
}

func healthAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	if len(endpoints(cCtx)) == 0 {
		return usageErr(cCtx, "--addr is empty")
	}
	rep := checkHealth(cCtx)
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		if err := printJSON(w, rep); err != nil {
			return err
		}
	} else {
		tw := newTable(w)
		row(tw, "ENDPOINT", "NODE", "STATE", "LEADER", "TERM", "APPLIED", "REACHABLE")
		for _, n := range rep.Nodes {
			if !n.Reachable {
				row(tw, n.Endpoint, "-", "-", "-", "-", "-", "✗ "+oneLine(n.Error, 80))
				continue
			}
			row(tw, n.Endpoint, n.Node, n.State, dash(n.Leader), n.Term, n.AppliedIndex, "✓")
		}
		tw.Flush()
		reachable := 0
		for _, n := range rep.Nodes {
			if n.Reachable {
				reachable++
			}
		}
		if rep.Healthy {
			fmt.Fprintf(w, "healthy: leader %s, %d/%d agents reachable\n", rep.Leader, reachable, len(rep.Nodes))
		}
	}
	if !rep.Healthy {
		hint := "start the missing agents (`flowd dev` for a local cluster), or check --addr / FLOWD_ADDR"
		if !jsonOut(cCtx) {
			return failf(hint, "unhealthy: %s", rep.Problem)
		}
		return exitWith(exitError)
	}
	return nil
}
