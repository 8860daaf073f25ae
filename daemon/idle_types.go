package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/rpc"
)

// Types without workers (run.get waiting_for_worker). Which task types live
// workers serve is leader memory (the worker registry sees every claim,
// forwarded ones included), not replicated state: a follower asks the
// leader (workers.list, which carries the served filters) and keeps the
// answer for servedCacheFor, so polling run.get on a follower costs the
// leader at most one small call per second per follower.

const (
	// servedCacheFor is how long a follower reuses the leader's answer.
	servedCacheFor = time.Second
	// servedLookupTimeout bounds a follower's question to the leader: a
	// run.get never waits long for a read-side hint.
	servedLookupTimeout = 750 * time.Millisecond
)

// idleTypeAfter is --idle-type-after (the default when the config was not
// normalized, as with agents built around a fake in tests), kept in the
// registry so it can be read without the config.
func (a *Agent) idleTypeAfter() time.Duration {
	if d := time.Duration(a.workers.idleAfter.Load()); d > 0 {
		return d
	}
	return DefaultIdleTypeAfter
}

// watchOffice starts the worker registry's learning window when this node
// takes office, not at the first read or claim: a run on a type no worker
// ever served is flagged --idle-type-after after the leader took office even
// if nobody looked before. A raft state change that leaves this node leading
// keeps the window's start.
func (a *Agent) watchOffice(ctx context.Context) {
	var office time.Time // when this node last took office; zero while it follows
	for ctx.Err() == nil {
		epoch := a.prop.LeaderEpoch() // before asking who leads
		if epoch == nil {
			return // a proposer without leadership terms (a test's fake)
		}
		if a.prop.IsLeader() {
			if office.IsZero() {
				office = time.Now().UTC()
			}
			a.workers.tookOffice(epoch, office)
		} else {
			office = time.Time{}
		}
		select {
		case <-epoch.Done():
		case <-ctx.Done():
		}
	}
}

// workersLocal is workers.list answered from this node's registry (the
// leader's, or a forwarded call's).
func (a *Agent) workersLocal() rpc.WorkersResult {
	after := a.idleTypeAfter()
	served, known := a.workers.served(after, a.prop.LeaderEpoch())
	return rpc.WorkersResult{Workers: a.workers.list(a.state.LeaseOwners()), Served: served, ServedKnown: known,
		IdleTypeAfterMS: after.Milliseconds()}
}

// servedTypes returns the leader's view of the served filters: local on the
// leader, otherwise asked of it and cached.
func (a *Agent) servedTypes(ctx context.Context) (rpc.WorkersResult, error) {
	if a.prop.IsLeader() || isForwarded(ctx) {
		return a.workersLocal(), nil
	}
	r := a.workers
	r.fetchMu.Lock() // one question in flight; the others take its answer
	defer r.fetchMu.Unlock()
	if c := r.remote; c != nil && time.Since(c.at) < servedCacheFor {
		return c.res, c.err
	}
	ctx, cancel := context.WithTimeout(ctx, servedLookupTimeout)
	defer cancel()
	res, err := onLeader(ctx, a.proxy, rpc.MethodWorkersList, struct{}{}, func(context.Context) (rpc.WorkersResult, error) {
		return a.workersLocal(), nil
	})
	res.Workers = nil // only the filters are kept
	r.remote = &servedAnswer{at: time.Now(), res: res, err: err}
	return res, err
}

// servedAnswer is a follower's cached answer from the leader.
type servedAnswer struct {
	at  time.Time
	res rpc.WorkersResult
	err error
}

// waitingForWorker returns the types of the run's dispatchable tasks that no
// live worker claims in their queue, sorted, or a note saying why that
// could not be told. A run with nothing dispatchable asks nobody.
func (a *Agent) waitingForWorker(ctx context.Context, tasks []*fsm.Task) (types []string, note string) {
	type qt struct{ queue, typ string }
	var want []qt
	for _, t := range tasks {
		if !t.Indexed {
			continue // not in the ready index: nothing a worker could claim
		}
		typ := t.Type
		if t.State == domain.TaskReverting {
			typ = t.RevertType
		}
		if k := (qt{t.Queue, typ}); !slices.Contains(want, k) {
			want = append(want, k)
		}
	}
	if len(want) == 0 {
		return nil, ""
	}
	res, err := a.servedTypes(ctx)
	if err != nil {
		return nil, "could not ask the leader which task types live workers serve (" + err.Error() + "); see `flowd worker list`"
	}
	for _, k := range want {
		if slices.ContainsFunc(res.Served, func(f rpc.ServedFilter) bool { return f.Serves(k.queue, k.typ) }) {
			continue
		}
		if !res.ServedKnown {
			return nil, "the leader took office less than --idle-type-after ago and is still learning which workers are live"
		}
		if !slices.Contains(types, k.typ) {
			types = append(types, k.typ)
		}
	}
	slices.Sort(types)
	return types, ""
}
