package rpc

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// scanCall reads a request line of the shape nearly every client sends,
// {"jsonrpc":"2.0","id":..,"method":"..","params":..} with the members in
// any order, without building a map: decoding every line into a
// map[string]json.RawMessage (a map and a copy of each member) cost 12
// allocations per request. It walks the line with the duplicate-member
// scanner's primitives (dupkeys.go) and applies directCall's rules
// (directMembers), so it reports ok only for a line that directCall, given
// that line decoded into a map, accepts with the same id, method and
// params; anything else (duplicate or extra members, an escaped member
// name, a line that is not valid JSON) reports false and goes the map's
// way, so the answers stay those of the general path (FuzzScanCall holds it
// to that).
//
// id and params are slices of line: a request line is a buffer of its own
// (lineReader), never reused.
func scanCall(line []byte) (id json.RawMessage, method []byte, params json.RawMessage, ok bool) {
	if !gojson.Valid(line) { // the scan below assumes valid JSON
		return nil, nil, nil, false
	}
	s := dupScan{b: line}
	s.ws()
	if s.i >= len(line) || line[s.i] != '{' {
		return nil, nil, nil, false
	}
	s.i++
	var version, m []byte
	hasParams := false
	for {
		s.ws()
		if line[s.i] == '}' {
			break
		}
		if line[s.i] == ',' {
			s.i++
			s.ws()
		}
		k := s.str(true)
		if !k.plain { // an escaped name is not one of ours spelled plainly
			return nil, nil, nil, false
		}
		s.ws()
		s.i++ // the ':'
		s.ws()
		start := s.i
		s.value(1)
		if s.stop() { // a duplicate inside a value: the map's way
			return nil, nil, nil, false
		}
		v := line[start:s.i]
		dup := false
		switch string(line[k.start:k.end]) {
		case "jsonrpc":
			dup, version = version != nil, v
		case "id":
			dup, id = id != nil, v
		case "method":
			dup, m = m != nil, v
		case "params":
			dup, hasParams, params = hasParams, true, v
		default:
			return nil, nil, nil, false
		}
		if dup {
			return nil, nil, nil, false
		}
	}
	if version == nil || id == nil || m == nil {
		return nil, nil, nil, false
	}
	return directMembers(version, id, m, params, hasParams)
}
