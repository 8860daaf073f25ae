package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/rpc"
)

// Rolling upgrades (fsm/registry.go; docs/operations.md, "Rolling
// upgrades"). The cluster applies the rules of its active state-machine
// version, replicated state. Each agent answers, on its forwarding port
// (members only), the range of versions its binary applies; the leader
// raises the active version (fsm.SetVersion) only to the highest version
// every voter applies, when an operator finalizes or, with
// --upgrade-auto-finalize, once every voter has supported it for that long
// (etcd's cluster version, CockroachDB's finalization). A release from
// before versioning does not answer and counts as applying version 1 only,
// so a cluster that still has one never moves. A member that cannot apply
// the version stops before the entry (fsm.VersionError) instead of
// diverging; a binary older than the active version refuses to start.

// methodMemberInfo is the forwarding port's member query: what this
// agent's binary applies. Only members reach that port.
const methodMemberInfo = "agent.member_info"

// memberInfo is methodMemberInfo's answer.
type memberInfo struct {
	ID      string `json:"id"`
	Release string `json:"release"`
	Min     int    `json:"min"`
	Max     int    `json:"max"`
	Active  int    `json:"active"`
	// The member's raft log, for autopilot's health (autopilot.go).
	LastTerm      uint64 `json:"last_term"`
	LastIndex     uint64 `json:"last_index"`
	LastContactMS int64  `json:"last_contact_ms"`
}

func (a *Agent) memberInfo(context.Context, struct{}) (memberInfo, error) {
	mi := memberInfo{ID: a.cfg.NodeID, Release: a.cfg.Version, Min: int(fsm.MinVersion), Max: int(fsm.MaxVersion),
		Active: int(a.state.ActiveVersion())}
	if a.node != nil {
		st := a.node.LocalStats()
		mi.LastTerm, mi.LastIndex, mi.LastContactMS = st.LastTerm, st.LastIndex, st.LastContact.Milliseconds()
	}
	return mi, nil
}

func (a *Agent) fsmVersion() *rpc.FSMVersion {
	return &rpc.FSMVersion{Active: int(a.state.ActiveVersion()), Min: int(fsm.MinVersion), Max: int(fsm.MaxVersion)}
}

// memberAskTimeout bounds one member's answer: a member that does not
// answer in it is reported as unknown (and blocks a raise).
const memberAskTimeout = time.Second

// askMembers asks every server in parallel about itself (this agent
// answers for itself); errs[i] says why server i did not answer. The
// member report of list-peers and upgrades, and autopilot's stats, come
// from it.
func (a *Agent) askMembers(ctx context.Context, servers []cluster.PeerStatus) (infos []memberInfo, errs []error) {
	infos, errs = make([]memberInfo, len(servers)), make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if s.ID == a.cfg.NodeID {
			infos[i], _ = a.memberInfo(ctx, struct{}{})
			continue
		}
		wg.Go(func() { infos[i], errs[i] = a.memberQuery(ctx, s.ID, s.Address) })
	}
	wg.Wait()
	return infos, errs
}

// memberVersions is every server's release and the state-machine versions
// it applies.
func (a *Agent) memberVersions(ctx context.Context) []rpc.MemberVersion {
	servers := a.prop.Servers()
	infos, errs := a.askMembers(ctx, servers)
	out := make([]rpc.MemberVersion, len(servers))
	for i, s := range servers {
		m := rpc.MemberVersion{ID: s.ID, Voter: strings.EqualFold(s.Suffrage, "voter")}
		var re *rpc.Error
		switch err := errs[i]; {
		case errors.As(err, &re) && re.Code == rpc.CodeMethodNotFound:
			// A release from before versioning applies version 1 only.
			m.Min, m.Max = int(fsm.V1), int(fsm.V1)
			m.Error = "its release predates state-machine versions: it applies version 1 only"
		case err != nil:
			m.Error = err.Error()
		default:
			m.Release, m.Min, m.Max = infos[i].Release, infos[i].Min, infos[i].Max
		}
		out[i] = m
	}
	return out
}

// memberQuery asks member id, at its forwarding port, about itself.
func (a *Agent) memberQuery(ctx context.Context, id, raftAddr string) (memberInfo, error) {
	var info memberInfo
	addr := a.prop.NodeMeta(id)["forward"]
	if addr == "" {
		var err error
		if addr, err = DeriveForwardAddr(raftAddr); err != nil {
			return info, fmt.Errorf("no forwarding address: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, memberAskTimeout)
	defer cancel()
	c, err := a.proxy.conn(ctx, addr)
	if err != nil {
		return info, fmt.Errorf("did not answer at %s: %w", addr, err)
	}
	if err := c.Call(ctx, methodMemberInfo, struct{}{}, &info); err != nil {
		var re *rpc.Error
		if errors.As(err, &re) {
			return info, err
		}
		return info, fmt.Errorf("did not answer at %s: %w", addr, err)
	}
	if info.ID != id {
		return info, fmt.Errorf("%s answers as %q", addr, info.ID)
	}
	return info, nil
}

// upgradeTarget is the highest version every voter applies, or why it is
// unknown.
func upgradeTarget(members []rpc.MemberVersion) (int, string) {
	target := 0
	for _, m := range members {
		if !m.Voter {
			continue
		}
		if m.Max == 0 {
			return 0, fmt.Sprintf("voter %s %s", m.ID, m.Error)
		}
		if target == 0 || m.Max < target {
			target = m.Max
		}
	}
	return target, ""
}

// upgradeState is the leader's auto-finalize clock.
type upgradeState struct {
	mu            sync.Mutex
	target        int
	eligibleSince time.Time
}

func (u *upgradeState) observe(target int, now time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if target != u.target || target == 0 {
		u.target, u.eligibleSince = target, time.Time{}
		if target != 0 {
			u.eligibleSince = now
		}
	}
	return u.eligibleSince
}

func (u *upgradeState) since() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.eligibleSince
}

func (a *Agent) upgradeStatus(ctx context.Context, _ struct{}) (rpc.UpgradeStatus, error) {
	members := a.memberVersions(ctx)
	active := int(a.state.ActiveVersion())
	target, blocker := upgradeTarget(members)
	st := rpc.UpgradeStatus{Active: active, Members: members, Target: target, Blocker: blocker}
	if a.cfg.UpgradeAutoFinalize > 0 {
		st.AutoFinalizeAfter = a.cfg.UpgradeAutoFinalize.String()
	}
	if s := a.upgrade.since(); !s.IsZero() && a.prop.IsLeader() && target > active {
		st.EligibleSinceMS = s.UnixMilli()
	}
	return st, nil
}

func (a *Agent) upgradeFinalize(ctx context.Context, _ struct{}) (rpc.UpgradeResult, error) {
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodUpgradeFinalize, struct{}{}, func(ctx context.Context) (rpc.UpgradeResult, error) {
		return a.finalize(ctx, "operator")
	})
}

// finalize raises the active version to the highest one every voter
// applies (on the leader).
func (a *Agent) finalize(ctx context.Context, by string) (rpc.UpgradeResult, error) {
	active := int(a.state.ActiveVersion())
	target, blocker := upgradeTarget(a.memberVersions(ctx))
	if blocker != "" {
		return rpc.UpgradeResult{From: active, To: active}, invalid("cannot finalize the upgrade: %s; every voter must answer with its versions (start it, or remove it with `flowd operator raft remove-peer`)", blocker)
	}
	if target <= active {
		return rpc.UpgradeResult{From: active, To: active}, nil
	}
	res, _, err := propose[fsm.VersionResult](ctx, a.prop, &fsm.SetVersion{Version: fsm.Version(target)}, alone)
	if err != nil {
		return rpc.UpgradeResult{From: active, To: active}, err
	}
	if res.Changed {
		a.log.Info("state-machine version raised", "from", res.From, "to", res.To, "by", by)
	}
	return rpc.UpgradeResult{From: int(res.From), To: int(res.To), Changed: res.Changed}, nil
}

// upgradeLoop finalizes on its own (--upgrade-auto-finalize) once every
// voter has applied a newer version for that long. Only the leader acts;
// the clock restarts when the target changes or leadership moves. A fresh
// cluster (upgrade_fresh.go) is finalized at once, whatever the setting.
func (a *Agent) upgradeLoop(ctx context.Context) {
	after := a.cfg.UpgradeAutoFinalize
	var every time.Duration
	if after > 0 {
		every = min(10*time.Second, max(after/4, 100*time.Millisecond))
	}
	fresh := freshPoller{}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		wait := every
		if fw, ok := fresh.next(a); ok && (wait == 0 || fw < wait) {
			wait = fw
		}
		if wait == 0 {
			return // no auto-finalize, and the state has been given work
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !a.prop.IsLeader() {
			a.upgrade.observe(0, time.Time{})
			continue
		}
		if fresh.due && a.finalizeFresh(ctx, &fresh) {
			continue
		}
		if after <= 0 {
			continue
		}
		active := int(a.state.ActiveVersion())
		target, _ := upgradeTarget(a.memberVersions(ctx))
		if target <= active {
			target = 0
		}
		since := a.upgrade.observe(target, time.Now())
		if target == 0 || time.Since(since) < after {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, writeTimeout)
		if _, err := a.finalize(cctx, "auto-finalize"); err != nil && ctx.Err() == nil {
			a.log.Warn("automatic upgrade finalize failed; retrying", "err", err)
		}
		cancel()
	}
}

// versionCollector exports the versions (flowd_fsm_version{kind}).
type versionCollector struct{ a *Agent }

var versionDesc = prometheus.NewDesc("flowd_fsm_version",
	"State-machine versions: the cluster's active one as applied here (kind=active) and the range this binary applies (min, max).",
	[]string{"kind"}, nil)

func (c versionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- versionDesc }

func (c versionCollector) Collect(ch chan<- prometheus.Metric) {
	if c.a.state == nil {
		return
	}
	v := c.a.fsmVersion()
	for kind, n := range map[string]int{"active": v.Active, "min": v.Min, "max": v.Max} {
		ch <- prometheus.MustNewConstMetric(versionDesc, prometheus.GaugeValue, float64(n), kind)
	}
}
