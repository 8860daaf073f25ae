package daemon

import (
	"context"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/rpc"
)

// Autopilot (cluster/raftnode/autopilot.go) runs on the leader; the agent feeds it
// each member's raft stats, asked over the forwarding port (memberQuery),
// and reports its view (operator.autopilot.state, /metrics).

// ProbeMembers implements cluster.MemberProber.
func (a *Agent) ProbeMembers(ctx context.Context, servers []cluster.PeerStatus) map[string]cluster.MemberStats {
	infos, errs := a.askMembers(ctx, servers)
	out := make(map[string]cluster.MemberStats, len(servers))
	for i, s := range servers {
		if errs[i] == nil {
			out[s.ID] = cluster.MemberStats{LastTerm: infos[i].LastTerm, LastIndex: infos[i].LastIndex,
				LastContact: time.Duration(infos[i].LastContactMS) * time.Millisecond}
		}
	}
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
