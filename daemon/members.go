package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/fsm"
)

// Member addresses. Each agent's addresses (its forwarding port above all)
// are replicated state (fsm.NodeInfo): the leader publishes its own when it
// takes office (cluster/leader.go), and a follower asks the leader to
// publish its own (methodPublishMeta on the leader's forwarding port) when
// the record is missing or differs, so the leader can reach every member's
// forwarding port (upgrade.go's member query) even where it is not the
// default derived from the raft address.

// methodPublishMeta is the forwarding port's "record my addresses" call.
const methodPublishMeta = "agent.publish_meta"

type publishMeta struct {
	ID   string            `json:"id"`
	Meta map[string]string `json:"meta"`
}

// publishMetaFor records a member's addresses (on the leader).
func (a *Agent) publishMetaFor(ctx context.Context, p publishMeta) (struct{}, error) {
	if !slices.ContainsFunc(a.prop.Servers(), func(s cluster.PeerStatus) bool { return s.ID == p.ID }) {
		return struct{}{}, invalid("%q is not a member of the raft configuration", p.ID)
	}
	if maps.Equal(a.prop.NodeMeta(p.ID), p.Meta) {
		return struct{}{}, nil
	}
	_, _, err := a.prop.Propose(ctx, &fsm.NodeInfo{ID: p.ID, Meta: p.Meta})
	return struct{}{}, err
}

// metaLoop, on a follower, has the leader record this agent's addresses
// whenever they are not what the replicated state says: after start and
// after every change of leader.
func (a *Agent) metaLoop(ctx context.Context, meta map[string]string) {
	for ctx.Err() == nil {
		epoch := a.prop.LeaderEpoch()
		id, _ := a.prop.Leader()
		if id != "" && id != a.cfg.NodeID && !maps.Equal(a.prop.NodeMeta(a.cfg.NodeID), meta) {
			if err := a.askPublish(ctx, epoch, meta); err != nil {
				a.log.Debug("publish this agent's addresses through the leader", "err", err)
				select { // the leader may still be taking office: try again
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-epoch.Done():
		case <-time.After(time.Minute): // a record lost to a restore
		}
	}
}

func (a *Agent) askPublish(ctx, epoch context.Context, meta map[string]string) error {
	id, addr := a.proxy.leaderAddr()
	if id == "" || addr == "" {
		return fmt.Errorf("no leader")
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	c, err := a.proxy.conn(ctx, addr)
	if err != nil {
		return err
	}
	return c.CallUntil(ctx, epoch.Done(), methodPublishMeta, publishMeta{ID: a.cfg.NodeID, Meta: meta}, nil)
}
