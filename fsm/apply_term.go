package fsm

// A new leader's term: unacknowledged leases restart their lease period.
//
// A claim's answer can be lost with the leader that granted it: the leader
// is stopped or cut off between applying the claim entry and answering,
// and the worker learns nothing until its client gives up on that agent
// and re-sends the claim's request id elsewhere (a client's patience, then
// an election). Until the worker acknowledges the lease (a heartbeat, a
// completion), the lease is the only thing that keeps the task for it, and
// a short lease (seconds) can expire before the re-sent claim reaches the
// new leader: the task returns to ready (no attempt spent) but the worker
// was never told, an orphan lease. So the new leader's first command gives
// every lease that is still unacknowledged a fresh lease period from the
// new term's start (never shorter than it had). A worker that did die
// costs one extra lease period for those tasks; an acknowledged lease is
// left alone (its worker heartbeats or completes on its own).

// NewTerm renews up to Limit (0: 1000) unacknowledged leases, and stops
// early at half the entry write limit (a running task's record holds its
// input, up to 1 MiB); More in its CountResult asks for another.
type NewTerm struct {
	Stamped
	Leader string `json:"leader,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

func (*NewTerm) Type() MsgType { return MsgNewTerm }

func (a *applier) applyNewTerm(c *NewTerm) any {
	limit := c.Limit
	if limit <= 0 {
		limit = 1000
	}
	var ids []string
	must(a.tx.Scan(pfxLease, nil, false, func(k, _ []byte) bool {
		ids = append(ids, string(k[len(pfxLease)+8:]))
		return true
	}))
	res := &CountResult{}
	written := 0 // the renewed records, rewritten when the command ends
	for _, id := range ids {
		t := a.loadTaskByID(id)
		if t == nil || !t.Leased() || t.acked() || a.leaseEnd(t) <= t.LeaseExpiresAt {
			continue
		}
		if res.Count == limit || written > MaxEntryWriteBytes/2 {
			res.More = true // the rest in the leader's next NewTerm
			break
		}
		a.extendLease(t)
		written += t.Msgsize()
		res.Count++
	}
	return res
}
