package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"

	gojson "github.com/goccy/go-json"

	"github.com/flowd/flowd/rpc"
)

// Forwarded calls as bytes. A follower that forwards one of the relayed
// methods sends its client's params as they arrived and hands the leader's
// answer back to its client as the leader wrote it: no params are encoded
// again, no result is decoded into the handler's type and encoded again.
// The handler still decodes and checks the params (a bad call is refused
// here, and ids the follower picks are picked here), so what is skipped is
// the re-encoding on the way out and the decoding and re-encoding on the
// way back. The envelope (agent.forward) is the same on the wire, so
// agents of the previous release forward to and from this one.

// relayedMethods are the forwarded methods whose handler returns what
// onLeader answered, untouched, and forwards its params through asSent:
// the calls a worker or producer makes per job.
var relayedMethods = map[string]bool{
	rpc.MethodRunSubmit:     true,
	rpc.MethodTaskClaim:     true,
	rpc.MethodTaskComplete:  true,
	rpc.MethodTaskFail:      true,
	rpc.MethodTaskHeartbeat: true,
}

type relayKey struct{}

// relay is one relayed call on a follower: the params its client sent, and
// the leader's answer once onLeader forwarded it.
type relay struct {
	method string
	params json.RawMessage
	result json.RawMessage
}

// relaying wraps the handler of a relayed method: on a follower the
// leader's answer to the forwarded call is the result, as bytes. A call
// onLeader ran here (this node leads, or led by then) answers as usual.
func (a *Agent) relaying(method string, h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		if isForwarded(ctx) || a.proxy.node.IsLeader() {
			return h(ctx, raw)
		}
		rl := &relay{method: method, params: bytes.TrimSpace(raw)}
		v, err := h(context.WithValue(ctx, relayKey{}, rl), raw)
		if err == nil && rl.result != nil {
			return rpc.RawResult(rl.result), nil
		}
		return v, err
	}
}

// relayOf returns the relay of a call of method (nil: none; a nested call
// of another method decodes as usual).
func relayOf(ctx context.Context, method string) *relay {
	if rl, ok := ctx.Value(relayKey{}).(*relay); ok && rl.method == method {
		return rl
	}
	return nil
}

// fill is a member a follower's handler set in its params before
// forwarding them (an id it picked, so that a forward re-routed to a new
// leader repeats safely): name with value, in the top-level object, or in
// the object that is the top-level member in.
type fill struct{ in, name, value string }

// asSent returns what a follower forwards for a call of method whose
// handler decoded its params into p: the bytes the client sent, with the
// members the handler filled in added; or p itself (encoded on the way
// out) when the call is not relayed or the bytes cannot take the members
// (the client spelled one of them in another case, or escaped a name).
func asSent(ctx context.Context, method string, p any, fills ...fill) any {
	rl := relayOf(ctx, method)
	if rl == nil {
		return p
	}
	raw := rl.params
	if len(raw) == 0 || string(raw) == "null" {
		if len(fills) == 0 {
			return p
		}
		raw = json.RawMessage(`{}`)
	}
	if raw[0] != '{' {
		return p
	}
	for _, f := range fills {
		var ok bool
		if raw, ok = spliceMember(raw, f.in, f.name, f.value); !ok {
			return p
		}
	}
	return raw
}

// rawEnvelope is forwardCall encoded around params that are encoded
// already (the same members, so an agent of any release reads it).
func rawEnvelope(method string, params json.RawMessage, deadlineMS int64, o *forwardOrigin) (json.RawMessage, error) {
	b := make([]byte, 0, len(params)+160)
	b = append(b, `{"method":`...)
	b = strconv.AppendQuote(b, method) // method names are plain ASCII (rpc's method table)
	b = append(append(b, `,"params":`...), params...)
	if deadlineMS != 0 {
		b = strconv.AppendInt(append(b, `,"deadline_ms":`...), deadlineMS, 10)
	}
	if o != nil {
		ob, err := gojson.Marshal(o)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"for":`...), ob...)
	}
	return append(b, '}'), nil
}

var (
	claimResultType = reflect.TypeFor[rpc.ClaimResult]()
	waitResultType  = reflect.TypeFor[rpc.WaitResult]()
	writeIndexType  = reflect.TypeFor[interface{ WriteIndex() uint64 }]()
)

// writeIndexOf is R's WriteIndex read from its encoding: only the members
// it is made of are decoded (the rest is skipped), not the whole answer.
// TestWriteIndexOfMatchesWriteIndex holds it to R.WriteIndex.
func writeIndexOf[R any](raw json.RawMessage) uint64 {
	switch t := reflect.TypeFor[R](); {
	case t == claimResultType:
		var v struct {
			Tasks []struct {
				FencingToken uint64 `json:"fencing_token"`
			} `json:"tasks"`
		}
		if gojson.Unmarshal(raw, &v) != nil {
			return 0
		}
		var idx uint64
		for _, t := range v.Tasks {
			idx = max(idx, t.FencingToken)
		}
		return idx
	case t == waitResultType:
		var v struct {
			Run struct {
				ModifyIndex uint64 `json:"modify_index"`
			} `json:"run"`
		}
		if gojson.Unmarshal(raw, &v) != nil {
			return 0
		}
		return v.Run.ModifyIndex
	case t.Implements(writeIndexType):
		var v struct {
			Index uint64 `json:"index"`
		}
		if gojson.Unmarshal(raw, &v) != nil {
			return 0
		}
		return v.Index
	}
	return 0
}

// spliceMember returns raw, a JSON object, with "name":"value" added to it
// (in == "") or to the object that is its member in. It reports false,
// changing nothing, when raw is not as expected, when that object has a
// member whose name is name in any case or is escaped (a decoder would
// take it for name: the leader would see the member twice), or when value
// needs escaping.
func spliceMember(raw json.RawMessage, in, name, value string) (json.RawMessage, bool) {
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	s := jscan{b: raw}
	start, end := 0, len(raw)
	if in != "" {
		vs, ve, ok := s.member(0, in)
		if !ok || vs < 0 || raw[vs] != '{' {
			return nil, false
		}
		start, end = vs, ve
	}
	// Check the target object's names; find its closing brace.
	if vs, _, ok := s.member(start, name); !ok || vs >= 0 {
		return nil, false
	}
	closing := bytes.LastIndexByte(raw[:end], '}')
	if closing < start {
		return nil, false
	}
	empty := len(bytes.TrimSpace(raw[start+1:closing])) == 0
	out := make([]byte, 0, len(raw)+len(name)+len(value)+6)
	out = append(out, raw[:closing]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(append(append(out, '"'), name...), `":"`...)
	out = append(append(out, value...), '"')
	return append(out, raw[closing:]...), true
}

// jscan walks valid JSON (the server read the params as such; on anything
// else it reports false).
type jscan struct{ b []byte }

// member finds name among the members of the object at b[at]: the span of
// its value (-1, -1 when there is none). ok is false when the object is
// malformed, or has a member whose name matches name only in another case
// or is escaped.
func (s *jscan) member(at int, name string) (vs, ve int, ok bool) {
	b := s.b
	i := skipWS(b, at)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false
	}
	i = skipWS(b, i+1)
	vs, ve = -1, -1
	if i < len(b) && b[i] == '}' {
		return vs, ve, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return 0, 0, false
		}
		ks := i + 1
		ke, esc := strEnd(b, i)
		if ke < 0 {
			return 0, 0, false
		}
		key := string(b[ks : ke-1])
		if esc || (key != name && bytes.EqualFold([]byte(key), []byte(name))) {
			return 0, 0, false
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, false
		}
		i = skipWS(b, i+1)
		start := i
		if i = skipValue(b, i); i < 0 {
			return 0, 0, false
		}
		if key == name {
			if vs >= 0 {
				return 0, 0, false
			}
			vs, ve = start, i
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, 0, false
		}
		if b[i] == '}' {
			return vs, ve, true
		}
		if b[i] != ',' {
			return 0, 0, false
		}
		i = skipWS(b, i+1)
	}
	return 0, 0, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// strEnd returns the index just past the string starting at b[i] ('"'),
// and whether it has escapes; -1 if it does not end.
func strEnd(b []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// skipValue returns the index just past the value starting at b[i], -1 if
// it is malformed.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		e, _ := strEnd(b, i)
		return e
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, _ := strEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
scalar:
	for ; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			break scalar
		}
	}
	if j == i {
		return -1
	}
	return j
}
