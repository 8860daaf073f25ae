package daemon

import (
	"context"
	"maps"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Every agent's addresses (its forwarding address above all) are in the
// replicated state (fsm.NodeInfo), so any agent can forward a call to any
// other: to the leader (onLeader), or to the agent a snapshot transfer
// names (onNode). A leader publishes its own when it takes office
// (cluster); publishLoop has every agent check its record every
// publishEvery and publish it through the leader when it is missing or
// differs: a node that never led, and every node after a snapshot from
// another cluster (with that cluster's addresses) was restored.

// methodPublish is the forwarding port's method by which a member
// publishes its addresses through the leader (not a client method).
const methodPublish = "agent.publish"

// publishEvery is how often an agent checks its published record.
const publishEvery = 2 * time.Second

type publishParams struct {
	ID   string            `json:"id"`
	Meta map[string]string `json:"meta"`
}

// servePublish records a member's addresses (on the leader). A member
// authenticated by certificate publishes only its own.
func (a *Agent) servePublish(ctx context.Context, p publishParams) (rpc.OK, error) {
	if p.ID == "" || len(p.Meta) == 0 {
		return rpc.OK{}, invalid("id and meta are required")
	}
	if c, ok := rpc.CallerOf(ctx); ok && c.Member != "" && c.Member != "?" && c.Member != p.ID {
		return rpc.OK{}, invalid("member %s cannot publish the addresses of %s", c.Member, p.ID)
	}
	if maps.Equal(a.prop.NodeMeta(p.ID), p.Meta) {
		return rpc.OK{OK: true}, nil
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	if _, _, err := a.prop.Propose(ctx, &fsm.NodeInfo{ID: p.ID, Meta: p.Meta}); err != nil {
		return rpc.OK{}, err
	}
	return rpc.OK{OK: true}, nil
}

// publishSelf publishes this agent's addresses if its record differs.
func (a *Agent) publishSelf(ctx context.Context) error {
	if len(a.meta) == 0 || maps.Equal(a.prop.NodeMeta(a.cfg.NodeID), a.meta) {
		return nil
	}
	if id, _ := a.prop.Leader(); id == "" {
		return &domain.UnavailableError{Reason: "no leader"}
	}
	ctx, cancel := withTimeout(ctx, 5*time.Second)
	defer cancel()
	p := publishParams{ID: a.cfg.NodeID, Meta: a.meta}
	_, err := onLeader(ctx, a.proxy, methodPublish, p, func(ctx context.Context) (rpc.OK, error) { return a.servePublish(ctx, p) })
	if err == nil {
		a.log.Debug("published this agent's addresses", "meta", a.meta)
	}
	return err
}

// publishLoop keeps this agent's record right until ctx ends.
func (a *Agent) publishLoop(ctx context.Context) {
	for {
		next := publishEvery
		if err := a.publishSelf(ctx); err != nil && ctx.Err() == nil {
			a.log.Debug("publishing this agent's addresses failed; retrying", "err", err)
			next = 100 * time.Millisecond // e.g. no leader yet: try again soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}
