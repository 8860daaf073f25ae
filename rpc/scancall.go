package rpc

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// scanCall reads a request line of the shape nearly every client sends,
// {"jsonrpc":"2.0","id":..,"method":"..","params":..} with the members in
// any order, without building a map: decoding every line into a
// map[string]json.RawMessage (a map and a copy of each member) was ~14 µs
// of the leader's CPU per job at W=64 (it reads three requests per job).
// It reports ok only for a line that directCall, given that line decoded
// into a map, accepts with the same id, method and params; anything else
// (duplicate or extra members, a null id, an escaped method, a line that
// is not valid JSON) reports false and goes the map's way, so the answers
// stay those of the general path (FuzzScanCall holds it to that).
//
// id and params are slices of line: a request line is a buffer of its own
// (lineReader), never reused.
func scanCall(line []byte) (id json.RawMessage, method string, params json.RawMessage, ok bool) {
	if !gojson.Valid(line) {
		return nil, "", nil, false
	}
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, "", nil, false
	}
	i++
	var version, m []byte
	var seenParams bool
	for {
		i = skipSpace(line, i)
		if line[i] == '}' {
			break
		}
		if line[i] == ',' {
			i = skipSpace(line, i+1)
		}
		// A key: valid JSON, so a string; one with an escape is not one of
		// ours spelled plainly.
		end := stringEnd(line, i)
		key := line[i+1 : end-1]
		for _, c := range key {
			if c == '\\' {
				return nil, "", nil, false
			}
		}
		i = skipSpace(line, end)
		i = skipSpace(line, i+1) // the ':'
		vend := valueEnd(line, i)
		v := line[i:vend]
		i = vend
		switch string(key) {
		case "jsonrpc":
			if version != nil {
				return nil, "", nil, false
			}
			version = v
		case "id":
			if id != nil {
				return nil, "", nil, false
			}
			id = v
		case "method":
			if m != nil {
				return nil, "", nil, false
			}
			m = v
		case "params":
			if seenParams {
				return nil, "", nil, false
			}
			seenParams, params = true, v
		default:
			return nil, "", nil, false
		}
	}
	if string(version) != `"2.0"` || id == nil || m == nil {
		return nil, "", nil, false
	}
	if !(id[0] == '"' || id[0] == '-' || (id[0] >= '0' && id[0] <= '9')) {
		return nil, "", nil, false // null (a notification) or not an id
	}
	if len(m) < 3 || m[0] != '"' {
		return nil, "", nil, false
	}
	for _, c := range m[1 : len(m)-1] {
		if c == '\\' {
			return nil, "", nil, false
		}
	}
	if seenParams {
		if string(params) == "null" {
			params = nil
		} else if params[0] != '{' && params[0] != '[' {
			return nil, "", nil, false
		}
	}
	return id, string(m[1 : len(m)-1]), params, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the (valid) JSON value at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // a number, true, false or null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j
	}
}
