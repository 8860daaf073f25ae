package domain

import (
	"bytes"
	"encoding/json"
)

// The fast path of ParseSpec. The general path decodes a spec into maps to
// report every unknown field with its path, which reads the spec four
// times (the object, the task list, each task, each field) and was the
// costliest part of a submit on the leader. Nearly every spec that arrives
// is well-formed, so ParseSpec first checks, in one pass over the bytes,
// that every member name is exactly one the spec knows (byte for byte:
// encoding/json matches struct fields regardless of case, and the general
// path would report "Key" as unknown), each once per object (decoded into
// structs, a repeated "retry" would merge where the maps keep the last),
// with tasks an array of objects; then it decodes into the structs in one
// call and validates. Anything else, including every spec with a problem,
// takes the general path, so errors are exactly its errors.
//
// Written here rather than with a JSON library because fsm/domain uses
// the standard library only; it skips values without validating them
// (json.Unmarshal validates the whole spec right after).

// parseSpecFast decodes raw when its member names are exactly the spec's;
// ok false means the general path must decide.
func parseSpecFast(raw []byte) (spec Spec, ok bool) {
	if !specKeysExact(raw) {
		return Spec{}, false
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return Spec{}, false
	}
	for i := range spec.Tasks {
		t := &spec.Tasks[i]
		switch {
		case t.Input == nil:
		case bytes.Equal(t.Input, []byte("null")):
			t.Input = nil
		default:
			t.Input = compact(t.Input)
		}
	}
	return spec, true
}

// InputSpan is where one task's input value is in a spec's bytes:
// raw[Start:End] is the value of tasks[Task].input.
type InputSpan struct{ Task, Start, End int }

// SpecShape appends to buf the spec raw with every task's input value
// replaced by null, and returns it with where those values are in raw. A
// queue workload submits one workflow with a different input per job: the
// shape is the same for every job, so a parse of the shape can be kept
// and reused (FillInputs). ok is false when raw is not a spec the fast
// path reads (ParseSpec decides it then).
func SpecShape(raw, buf []byte) (shape []byte, inputs []InputSpan, ok bool) {
	s := keyScan{b: raw, inputs: &inputs}
	s.space()
	if !s.members(specFields, func(name []byte) bool {
		if string(name) == "tasks" {
			return s.tasks()
		}
		return s.skip()
	}) {
		return nil, nil, false
	}
	if s.space(); s.i != len(s.b) {
		return nil, nil, false
	}
	at := 0
	for _, in := range inputs {
		buf = append(append(buf, raw[at:in.Start]...), "null"...)
		at = in.End
	}
	return append(buf, raw[at:]...), inputs, true
}

// FillInputs returns shape, a spec ParseSpec returned for the shape of raw
// (SpecShape), with raw's task inputs in it, compacted as ParseSpec
// compacts them. ok is false when an input is not valid JSON or is over
// the limit: ParseSpec(raw) reports it. The result shares everything but
// its task list and inputs with shape.
func FillInputs(shape Spec, raw []byte, inputs []InputSpan, lim Limits) (Spec, bool) {
	if len(inputs) == 0 {
		return shape, true
	}
	tasks := make([]TaskSpec, len(shape.Tasks))
	copy(tasks, shape.Tasks)
	for _, in := range inputs {
		v := raw[in.Start:in.End]
		if string(v) == "null" {
			continue
		}
		var c bytes.Buffer
		c.Grow(len(v))
		if in.Task >= len(tasks) || json.Compact(&c, v) != nil || c.Len() > lim.MaxInputBytes {
			return Spec{}, false // not valid JSON, or over the limit
		}
		tasks[in.Task].Input = c.Bytes()
	}
	shape.Tasks = tasks
	return shape, true
}

// keyScan walks the JSON text b from i.
type keyScan struct {
	b []byte
	i int
	// inputs, when set, collects where each task's input value is.
	inputs *[]InputSpan
	task   int // index of the task being read
}

func specKeysExact(raw []byte) bool {
	s := keyScan{b: raw}
	s.space()
	if !s.members(specFields, func(name []byte) bool {
		if string(name) == "tasks" {
			return s.tasks()
		}
		return s.skip()
	}) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

// tasks reads the tasks value: null or an array of task objects.
func (s *keyScan) tasks() bool {
	if s.literal("null") {
		return true
	}
	if !s.byte('[') {
		return false
	}
	s.space()
	if s.byte(']') {
		return true
	}
	for {
		s.space()
		if !s.members(taskFields, func(name []byte) bool {
			switch {
			case string(name) == "retry":
				return s.retry()
			case string(name) == "input" && s.inputs != nil:
				start := s.i
				ok := s.skip()
				*s.inputs = append(*s.inputs, InputSpan{Task: s.task, Start: start, End: s.i})
				return ok
			}
			return s.skip()
		}) {
			return false
		}
		s.task++
		s.space()
		if s.byte(']') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// retry reads a retry value: null or an object of retry fields.
func (s *keyScan) retry() bool {
	if s.literal("null") {
		return true
	}
	return s.members(retryFields, func([]byte) bool { return s.skip() })
}

// members reads an object whose names are all in known, each once and
// without escapes, calling value for each member's value.
func (s *keyScan) members(known map[string]bool, value func(name []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	var seen [16][]byte
	n := 0
	s.space()
	if s.byte('}') {
		return true
	}
	for {
		s.space()
		name, ok := s.name()
		if !ok || !known[string(name)] {
			return false
		}
		for _, prev := range seen[:n] {
			if bytes.Equal(prev, name) {
				return false
			}
		}
		if n == len(seen) {
			return false
		}
		seen[n] = name
		n++
		s.space()
		if !s.byte(':') {
			return false
		}
		s.space()
		if !value(name) {
			return false
		}
		s.space()
		if s.byte('}') {
			return true
		}
		if !s.byte(',') {
			return false
		}
	}
}

// name reads a member name without escapes (the bytes are raw's).
func (s *keyScan) name() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			name := s.b[start:s.i]
			s.i++
			return name, true
		case '\\':
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// skip steps over one value (objects and arrays with what they hold).
func (s *keyScan) skip() bool {
	depth := 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch c {
		case '"':
			if !s.str() {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return false
			}
			depth--
			if depth == 0 {
				s.i++
				return true
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return false
			}
		default: // a number or literal: up to the next delimiter
			if depth == 0 {
				for s.i < len(s.b) && !isDelim(s.b[s.i]) {
					s.i++
				}
				return true
			}
		}
		s.i++
	}
	return false
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r', ':':
		return true
	}
	return false
}

// str steps over a string, escapes included.
func (s *keyScan) str() bool {
	s.i++ // the opening quote
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return true
		}
		s.i++
	}
	return false
}

func (s *keyScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *keyScan) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *keyScan) literal(lit string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(lit)) && (s.i+len(lit) == len(s.b) || isDelim(s.b[s.i+len(lit)])) {
		s.i += len(lit)
		return true
	}
	return false
}
