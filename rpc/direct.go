package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"
	"unsafe"

	gojson "github.com/goccy/go-json"

	"github.com/creachadair/jrpc2"
)

// The direct path. jrpc2 parses every inbound line with encoding/json,
// twice (once as a batch-or-message, once into a map to find extra keys),
// marshals every response with encoding/json again, and runs each request
// on a goroutine of its own; on a loaded agent that was the largest part
// of the RPC layer's CPU (~65 µs per job on the leader). A line that is one
// well-formed call of a served method, which is nearly every line a client
// sends, is served here instead: the line was already decoded once (by
// goccy/go-json, to count the replies it is owed), the handler runs on a
// warm goroutine with the same context, role check, panic recovery, error
// mapping and result check as under jrpc2 (Server.call), and the response
// is assembled around the already-encoded result.
//
// Everything else still goes to jrpc2, so its answers stay the reference:
// batches, notifications, unknown methods, and any line with a field,
// version, id or params jrpc2 would reject. The direct path keeps jrpc2's
// rules for what it serves: at most Options.MaxConcurrent calls in flight
// per connection (reading waits for a slot), and a call whose id equals
// one in flight is answered "duplicate request ID" (-32600).

// directCall reports whether the decoded single message obj is a call the
// direct path may serve: exactly the members jsonrpc ("2.0"), id (a string
// or number), method (a string without escapes) and optionally params
// (null, an object or an array).
func directCall(obj map[string]json.RawMessage) (id json.RawMessage, method []byte, params json.RawMessage, ok bool) {
	v, okV := obj["jsonrpc"]
	id, okID := obj["id"]
	m, okM := obj["method"]
	p, okP := obj["params"]
	n := 3
	if okP {
		n++
	}
	if !okV || !okID || !okM || len(obj) != n {
		return nil, nil, nil, false
	}
	return directMembers(v, id, m, p, okP)
}

// directMembers applies directCall's rules to a call's members (as found
// in a map or by scanCall): version "2.0", id a string or number, method a
// string without escapes, params (if present) null, an object or an array.
// The method is its name's bytes (a slice of m: no string is made for a
// line, the server looks the name up as it is).
func directMembers(version, id, m, p json.RawMessage, hasParams bool) (json.RawMessage, []byte, json.RawMessage, bool) {
	if string(version) != `"2.0"` {
		return nil, nil, nil, false
	}
	if len(id) == 0 || !(id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) {
		return nil, nil, nil, false // null (a notification) or not an id
	}
	if len(m) < 3 || m[0] != '"' || m[len(m)-1] != '"' || bytes.IndexByte(m, '\\') >= 0 {
		return nil, nil, nil, false
	}
	var params json.RawMessage
	if hasParams && !isNullJSON(p) {
		if p[0] != '{' && p[0] != '[' {
			return nil, nil, nil, false
		}
		params = p
	}
	return id, m[1 : len(m)-1], params, true
}

// serveDirect serves one call of cs without jrpc2, or reports false to
// leave it to jrpc2 (a method this server does not have). It returns once
// the call holds a concurrency slot; the call runs on a warm goroutine.
//
// A call costs no allocation of its own here: the method's name is the
// table's string (looked up by the line's bytes), the id's in-flight key
// is the id's bytes in the request line (which nothing reuses, see
// scanCall, and which outlives the key), and the call's state is a pooled
// directJob handed to the warm goroutine.
func (s *Server) serveDirect(cs *connState, id json.RawMessage, method []byte, params json.RawMessage) bool {
	e, ok := s.handlers[string(method)]
	if !ok {
		return false
	}
	select {
	case cs.sem <- struct{}{}:
	case <-cs.ctx.Done():
		return true // the connection is gone: nobody to answer
	}
	cs.ch.owe(1)
	key := unsafe.String(unsafe.SliceData(id), len(id)) // id is never empty
	cs.idMu.Lock()
	if _, dup := cs.inflight[key]; dup {
		cs.idMu.Unlock()
		<-cs.sem
		cs.ch.reply(id, nil, &jrpc2.Error{Code: jrpc2.InvalidRequest, Message: "duplicate request ID", Data: mustJSON(string(id))})
		return true
	}
	if cs.inflight == nil {
		cs.inflight = map[string]struct{}{}
	}
	cs.inflight[key] = struct{}{}
	cs.idMu.Unlock()
	cs.direct.Add(1)
	j := directJobs.Get().(*directJob)
	*j = directJob{s: s, cs: cs, id: id, key: key, method: e.name, h: e.h, budget: e.budget, params: params}
	s.warm.start(j)
	return true
}

// directEntry is a method of the direct path: its name (the table's own
// string) and handler.
type directEntry struct {
	name   string
	h      Handler
	budget bool // FlagWriteBudget
}

// directJob is one call on the direct path, run by a warm goroutine.
type directJob struct {
	s      *Server
	cs     *connState
	id     json.RawMessage
	key    string // id as the in-flight key
	method string
	h      Handler
	budget bool
	params json.RawMessage
}

var directJobs = sync.Pool{New: func() any { return new(directJob) }}

func (j *directJob) run() {
	s, cs, id, key, method, h, budget, params := j.s, j.cs, j.id, j.key, j.method, j.h, j.budget, j.params
	*j = directJob{}
	directJobs.Put(j)
	defer cs.direct.Done()
	ctx, cancel := callContext(cs.ctx, budget)
	res, werr := s.call(ctx, cs, method, h, params)
	cancel()
	cs.idMu.Lock()
	delete(cs.inflight, key)
	cs.idMu.Unlock()
	<-cs.sem
	cs.ch.reply(id, res, werr)
}

// callContext is a direct call's context: ended when its handler returns,
// and for a method with FlagWriteBudget already bounded by WriteBudget.
func callContext(conn context.Context, budget bool) (context.Context, context.CancelFunc) {
	if budget {
		return context.WithDeadline(conn, time.Now().Add(WriteBudget))
	}
	return context.WithCancel(conn)
}

// reply writes the response to call id: its encoded result, or werr. A
// result is queued as it is, between the response's head and tail.
func (c *serverChannel) reply(id, res json.RawMessage, werr *jrpc2.Error) {
	if werr == nil {
		_ = c.queue(1, replyHead, id, replyMid, res, replyTail) // a failed write closes the connection
		return
	}
	msg, _ := gojson.Marshal(struct {
		V  string          `json:"jsonrpc"`
		ID json.RawMessage `json:"id"`
		E  *jrpc2.Error    `json:"error"`
	}{"2.0", id, werr})
	_ = c.write(msg, 1)
}

var (
	replyHead = []byte(`{"jsonrpc":"2.0","id":`)
	replyMid  = []byte(`,"result":`)
	replyTail = []byte(`}`)
)

// owe records n replies owed for a line not handed to jrpc2.
func (c *serverChannel) owe(n int64) {
	c.mu.Lock()
	c.expected += n
	c.mu.Unlock()
}
