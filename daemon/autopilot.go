package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/rpc"
)

// Autopilot (cluster/autopilot.go) runs on the leader; the agent feeds it
// each member's raft stats, asked over the forwarding port (memberQuery),
// and reports its view (operator.autopilot.state, /metrics).

// ProbeMembers implements cluster.MemberProber.
func (a *Agent) ProbeMembers(ctx context.Context, servers []cluster.PeerStatus) map[string]cluster.MemberStats {
	out := map[string]cluster.MemberStats{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if s.ID == a.cfg.NodeID {
			mu.Lock()
			out[s.ID] = a.node.LocalStats()
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := a.memberQuery(ctx, s.ID, s.Address)
			if err != nil {
				return
			}
			mu.Lock()
			out[s.ID] = cluster.MemberStats{LastTerm: info.LastTerm, LastIndex: info.LastIndex,
				LastContact: time.Duration(info.LastContactMS) * time.Millisecond}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (a *Agent) autopilotConfig() cluster.AutopilotConfig {
	return cluster.AutopilotConfig{CleanupDeadServers: a.cfg.AutopilotCleanup(), MinQuorum: uint(max(a.cfg.AutopilotMinQuorum, 0)),
		LastContactThreshold: a.cfg.AutopilotLastContactThreshold, ServerStabilizationTime: a.cfg.AutopilotServerStabilizationTime,
		DeadServerAfter: a.cfg.AutopilotDeadServerAfter}
}

func (a *Agent) autopilotState(ctx context.Context, _ struct{}) (rpc.AutopilotState, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodAutopilotState, struct{}{}, func(context.Context) (rpc.AutopilotState, error) {
		st := a.node.AutopilotState()
		if st == nil {
			return rpc.AutopilotState{}, invalid("autopilot has no view yet (it runs on the leader and looks every second); try again")
		}
		out := rpc.AutopilotState{Healthy: st.Healthy, FailureTolerance: st.FailureTolerance, Leader: st.Leader,
			CleanupDeadServers: a.cfg.AutopilotCleanup()}
		for _, s := range st.Servers {
			rs := rpc.AutopilotServer{ID: s.ID, Address: s.Address, Status: s.Status, Voter: s.Voter, Leader: s.Leader,
				Healthy: s.Healthy, LastContactMS: s.LastContact.Milliseconds(), LastTerm: s.LastTerm, LastIndex: s.LastIndex}
			if !s.StableSince.IsZero() {
				rs.StableSinceMS = s.StableSince.UnixMilli()
			}
			out.Servers = append(out.Servers, rs)
		}
		return out, nil
	})
}
