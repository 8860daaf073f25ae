package rpc

import (
	"context"
	"errors"
	"time"
)

// Leader routing: which connection a call of a leader-aware Client goes
// over (see the Client doc; methodTable in methodtable.go classifies methods).
//
// State, all under Client.mu:
//   - nodes maps endpoints to node ids, learned from agent.hello answers;
//   - lead is the connection leader-bound calls use: to the endpoint of the
//     node that said it leads, possibly the current connection itself;
//   - a lead that stops being the leader is retired: no new call uses it,
//     and it is closed once the calls on it have ended (a long-poll claim
//     in flight is never cut by a re-route);
//
// Learning who leads (discover) runs one at a time (learnSlot) and never
// fails a call: when it finds no reachable leader the call goes to the
// current connection, whose agent forwards it, and learning is retried
// after a backoff (retryAt).
type routeState struct {
	nodes    map[string]string // endpoint -> node id
	leaderID string            // the leader as last reported ("" unknown)
	lead     *leaderLink
	retired  map[*leaderLink]struct{} // retired links with calls in flight
	fails    int                      // discoveries in a row without a leader
	retryAt  time.Time                // no discovery before this
}

// leaderLink is a connection to the leader's endpoint.
type leaderLink struct {
	conn    *Conn
	ep      string
	node    string
	checked time.Time // last confirmed as the leader
	suspect bool      // answered -32004: confirm before the next use
	users   int       // calls in flight on it
	retired bool
}

// Leader discovery backoff: after a discovery that found no reachable
// leader, leader-bound calls go to the current connection (forwarded) for
// leaderRetryBase doubling up to leaderRetryCap before the next try.
const (
	leaderRetryBase = 100 * time.Millisecond
	leaderRetryCap  = 2 * time.Second
)

// Leader returns the node id and endpoint that leader-bound calls go to
// now, or "", "" when they go to the current connection (its agent
// forwards them): routing is off (RouteAny, one endpoint), no leader-bound
// call was made yet, or the leader is not among the endpoints or cannot be
// reached.
func (c *Client) Leader() (node, endpoint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.r.lead; l != nil && alive(l.conn) {
		return l.node, l.ep
	}
	return "", ""
}

// pick chooses the connection for a call of class, returning the leader
// link too when the call goes over one (its user count raised: release it).
func (c *Client) pick(ctx context.Context, class routeClass) (*Conn, *leaderLink, error) {
	if c.routing {
		var l *leaderLink
		switch class {
		case routeLeader, routeRead:
			// Reads go to the leader too: it has applied every write
			// acknowledged to anyone, so a read after another client's (or
			// another process's) write sees it, as it did when every call
			// went through one agent. Without a leader link both go to the
			// current connection (its agent forwards writes).
			l = c.leader(ctx)
		}
		if l != nil {
			return l.conn, l, nil
		}
	}
	conn, err := c.get(ctx)
	return conn, nil, err
}

// release ends a call's use of l; a retired link is closed after its last
// call.
func (c *Client) release(l *leaderLink) {
	if l == nil {
		return
	}
	c.mu.Lock()
	l.users--
	done := l.retired && l.users == 0 && l.conn != c.conn
	if done {
		delete(c.r.retired, l)
	}
	c.mu.Unlock()
	if done {
		l.conn.Close()
	}
}

// retire stops new calls from using l (mu held); it returns a connection
// the caller must close (after unlocking) when no call is left on it.
func (c *Client) retire(l *leaderLink) *Conn {
	if c.r.lead == l {
		c.r.lead = nil
	}
	if l.retired {
		return nil
	}
	l.retired = true
	if l.conn == c.conn {
		return nil // the current connection: not ours to close
	}
	if l.users == 0 {
		return l.conn
	}
	c.r.retired[l] = struct{}{}
	return nil
}

// useLead returns the lead, with its user count raised, if it is alive and
// not suspect; it starts the periodic check when one is due.
func (c *Client) useLead() *leaderLink {
	c.mu.Lock()
	l := c.r.lead
	if l == nil {
		c.mu.Unlock()
		return nil
	}
	if !alive(l.conn) {
		c.r.lead, l.retired = nil, true
		c.r.leaderID = ""
		c.mu.Unlock()
		return nil
	}
	if l.suspect {
		c.mu.Unlock()
		return nil
	}
	l.users++
	due := c.opts.LeaderCheck > 0 && time.Since(l.checked) >= c.opts.LeaderCheck
	c.mu.Unlock()
	if due && c.checking.CompareAndSwap(false, true) {
		go func() {
			defer c.checking.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.DialTimeout)
			defer cancel()
			c.validate(ctx, l)
		}()
	}
	return l
}

// leader returns the link for a leader-bound call, learning who leads if
// needed, or nil: the call goes to the current connection (forwarded).
// While another call is learning, calls do not wait for it: they are
// forwarded.
func (c *Client) leader(ctx context.Context) *leaderLink {
	if l := c.useLead(); l != nil {
		return l
	}
	select {
	case c.learnSlot <- struct{}{}:
		defer func() { <-c.learnSlot }()
	default:
		return nil
	}
	if l := c.useLead(); l != nil {
		return l // learnt by another call meanwhile
	}
	c.mu.Lock()
	l, backoff := c.r.lead, time.Now().Before(c.r.retryAt)
	c.mu.Unlock()
	if l != nil && c.validate(ctx, l) {
		return c.useLead()
	}
	if backoff {
		return nil
	}
	found := c.findLeader(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if found == nil || c.closed {
		c.r.retryAt = time.Now().Add(min(leaderRetryCap, leaderRetryBase<<min(c.r.fails, 8)))
		c.r.fails++
		if found != nil && found.conn != c.conn {
			found.conn.Close()
		}
		return nil
	}
	c.r.fails, c.r.retryAt = 0, time.Time{}
	c.r.lead = found
	c.log.Debug("rpc: leader-bound calls go to the leader", "leader", found.node, "endpoint", found.ep)
	found.users++
	return found
}

// suspect marks l to be confirmed as the leader before its next use (it
// answered -32004: an election, or it stepped down).
func (c *Client) suspect(l *leaderLink) {
	c.mu.Lock()
	if c.r.lead == l {
		l.suspect = true
	}
	c.mu.Unlock()
}

// validate asks l's agent who leads. It returns true when l is still the
// lead (it is then confirmed); otherwise l is retired or dropped and the
// next leader-bound call learns again.
func (c *Client) validate(ctx context.Context, l *leaderLink) bool {
	res, err := c.hello(ctx, l.conn)
	var ce *ConnError
	if errors.As(err, &ce) {
		c.drop(l.conn)
		return false
	}
	c.mu.Lock()
	if c.r.lead != l {
		c.mu.Unlock()
		return false // replaced meanwhile
	}
	if err == nil {
		c.r.nodes[l.ep] = res.NodeID
		c.r.leaderID = res.LeaderID
	}
	if err != nil || (res.NodeID == l.node && res.LeaderID == l.node) {
		// Confirmed, or no answer in time (a busy leader is still the
		// leader; a dead one fails its connection).
		l.suspect, l.checked = false, time.Now()
		c.mu.Unlock()
		return true
	}
	c.log.Debug("rpc: the leader changed", "was", l.node, "now", res.LeaderID)
	closeConn := c.retire(l)
	c.r.retryAt = time.Time{} // learn at once
	c.mu.Unlock()
	if closeConn != nil {
		closeConn.Close()
	}
	return false
}

// hello asks conn's agent for its node id and the leader's, bounded by
// DialTimeout.
func (c *Client) hello(ctx context.Context, conn *Conn) (*HelloResult, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	var res HelloResult
	err := conn.Call(ctx, MethodHello, HelloParams{ProtocolVersion: ProtocolVersion, Client: "flowd-go-client"}, &res)
	return &res, err
}

// findLeader learns who leads from the current connection's agent, then
// finds the endpoint that reaches that node: known from an earlier hello,
// or by dialling the endpoints whose node is unknown yet, one at a time.
// nil: no leader known, or none of the endpoints reaches it.
func (c *Client) findLeader(ctx context.Context) *leaderLink {
	cur, err := c.get(ctx)
	if err != nil {
		return nil
	}
	res, err := c.hello(ctx, cur)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	c.r.nodes[cur.Endpoint()] = res.NodeID
	c.r.leaderID = res.LeaderID
	c.mu.Unlock()
	leader, curNode := res.LeaderID, res.NodeID
	tried := map[string]bool{cur.Endpoint(): true}
	for hops := 0; hops <= len(c.endpoints); hops++ {
		if leader == "" {
			return nil // an election is in progress: the agent waits for it
		}
		if leader == curNode {
			return &leaderLink{conn: cur, ep: cur.Endpoint(), node: leader, checked: time.Now()}
		}
		ep := c.candidate(leader, tried)
		if ep == "" || ctx.Err() != nil {
			return nil
		}
		tried[ep] = true
		dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
		conn, err := dialEndpoint(dctx, ep, &c.opts)
		cancel()
		if err != nil {
			c.log.Debug("rpc: cannot reach an endpoint while looking for the leader", "endpoint", ep, "err", err)
			continue
		}
		res, err := c.hello(ctx, conn)
		if err != nil {
			conn.Close()
			continue
		}
		c.mu.Lock()
		c.r.nodes[ep] = res.NodeID
		c.mu.Unlock()
		if res.NodeID == leader && res.LeaderID == leader {
			return &leaderLink{conn: conn, ep: ep, node: leader, checked: time.Now()}
		}
		conn.Close()
		if res.NodeID == leader && res.LeaderID != "" {
			leader = res.LeaderID // it stepped down meanwhile: follow its word
			clear(tried)
			tried[cur.Endpoint()] = true
		}
	}
	return nil
}

// candidate is the next endpoint to try for node: one known to reach it,
// else one whose node is not known yet, else "".
func (c *Client) candidate(node string, tried map[string]bool) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ep := range c.endpoints {
		if !tried[ep] && c.r.nodes[ep] == node {
			return ep
		}
	}
	for _, ep := range c.endpoints {
		if _, known := c.r.nodes[ep]; !tried[ep] && !known {
			return ep
		}
	}
	return ""
}

// observe learns from a successful call: node and leader ids from an
// agent.hello answer, and that a leadership transfer makes the leader
// suspect.
func (c *Client) observe(conn *Conn, l *leaderLink, method string, result any) {
	if !c.routing {
		return
	}
	if method == MethodRaftTransfer && l != nil {
		c.suspect(l)
		return
	}
	hr, _ := result.(*HelloResult)
	if method != MethodHello || hr == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if hr.NodeID != "" {
		c.r.nodes[conn.Endpoint()] = hr.NodeID
		if hr.LeaderID != "" && hr.LeaderID != c.r.leaderID {
			c.r.leaderID = hr.LeaderID
			if lead := c.r.lead; lead != nil && lead.node != hr.LeaderID {
				lead.suspect = true // confirm before the next leader-bound call
			}
		}
	}
}
