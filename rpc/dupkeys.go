package rpc

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Duplicate members in params. JSON leaves {"id":"a","id":"b"} undefined;
// Go's decoders keep the last, a proxy or a log may read the first, so a
// request could be checked as one thing and executed as another. Func
// refuses params holding an object with two members of the same name, at
// any depth (names compared after unescaping, so "\u0069d" is "id"; at the
// top level of a struct P also regardless of case, since the decoders
// match struct fields that way: "id" and "ID" fill the same field).
//
// The scan runs on every call: it allocates nothing for objects of up to
// dupInline members (a map past that) and reads each byte once.

// dupInline is how many member names of one object are kept on the stack.
const dupInline = 32

// dupMaxDepth bounds nesting (each level is a stack frame).
const dupMaxDepth = 512

type span struct {
	start, end int32 // the name's bytes between its quotes
	plain      bool  // no escapes, ASCII only
}

// dupScan is one scan of a params value.
type dupScan struct {
	b       []byte
	i       int
	foldTop bool
	dup     span   // the first duplicate found
	deep    bool   // nesting over dupMaxDepth
	found   bool   // a duplicate was found
	bad     bool   // not JSON: left to the decoder
	overMap string // a duplicate found by the map path (already decoded)
}

// duplicateMember returns the name of the first member that appears twice
// in one object of raw, or ok false. foldTop compares the top-level names
// regardless of case. A value that is not valid JSON is not judged (the
// decoder reports it). tooDeep reports nesting past dupMaxDepth.
func duplicateMember(raw []byte, foldTop bool) (name string, ok, tooDeep bool) {
	s := dupScan{b: raw, foldTop: foldTop}
	s.value(0)
	switch {
	case s.deep:
		return "", false, true
	case s.found && s.overMap != "":
		return s.overMap, true, false
	case s.found:
		return decodeName(raw[s.dup.start:s.dup.end]), true, false
	}
	return "", false, false
}

func (s *dupScan) stop() bool { return s.found || s.bad || s.deep }

func (s *dupScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *dupScan) value(depth int) {
	s.ws()
	if s.i >= len(s.b) {
		s.bad = true
		return
	}
	switch s.b[s.i] {
	case '{':
		if depth >= dupMaxDepth {
			s.deep = true
			return
		}
		s.object(depth)
	case '[':
		if depth >= dupMaxDepth {
			s.deep = true
			return
		}
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return
		}
		for !s.stop() {
			s.value(depth + 1)
			s.ws()
			if s.i >= len(s.b) {
				s.bad = true
				return
			}
			c := s.b[s.i]
			s.i++
			if c == ']' {
				return
			}
			if c != ',' {
				s.bad = true
			}
		}
	case '"':
		s.str(false)
	default: // number, true, false, null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

// str skips a string starting at its quote and returns its contents' span
// (plain is computed for member names only: key).
func (s *dupScan) str(key bool) span {
	s.i++ // the quote
	sp := span{start: int32(s.i), plain: true}
	for {
		q := bytes.IndexByte(s.b[s.i:], '"')
		if q < 0 {
			s.bad = true
			return sp
		}
		bs := bytes.IndexByte(s.b[s.i:s.i+q], '\\')
		if bs < 0 {
			s.i += q
			break
		}
		sp.plain = false
		s.i += bs + 2 // the escape and the character after it
		if s.i > len(s.b) {
			s.bad = true
			return sp
		}
	}
	sp.end = int32(s.i)
	s.i++
	if key && sp.plain {
		for _, c := range s.b[sp.start:sp.end] {
			if c >= 0x80 {
				sp.plain = false
				break
			}
		}
	}
	return sp
}

func (s *dupScan) object(depth int) {
	s.i++ // {
	var inline [dupInline]span
	n := 0
	var seen map[string]struct{} // past dupInline names
	fold := s.foldTop && depth == 0
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return
	}
	for !s.stop() {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			s.bad = true
			return
		}
		k := s.str(true)
		if s.bad {
			return
		}
		if seen == nil {
			for j := 0; j < n; j++ {
				if s.sameName(inline[j], k, fold) {
					s.dup, s.found = k, true
					return
				}
			}
			if n < dupInline {
				inline[n] = k
				n++
			} else {
				seen = make(map[string]struct{}, 2*dupInline)
				for _, sp := range inline {
					seen[s.mapKey(sp, fold)] = struct{}{}
				}
			}
		}
		if seen != nil {
			mk := s.mapKey(k, fold)
			if _, dup := seen[mk]; dup {
				s.found, s.overMap = true, decodeName(s.b[k.start:k.end])
				return
			}
			seen[mk] = struct{}{}
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			s.bad = true
			return
		}
		s.i++
		s.value(depth + 1)
		if s.stop() {
			return
		}
		s.ws()
		if s.i >= len(s.b) {
			s.bad = true
			return
		}
		c := s.b[s.i]
		s.i++
		if c == '}' {
			return
		}
		if c != ',' {
			s.bad = true
		}
	}
}

func (s *dupScan) mapKey(sp span, fold bool) string {
	name := decodeName(s.b[sp.start:sp.end])
	if fold {
		return strings.ToLower(name)
	}
	return name
}

// sameName compares two member names as the decoders would.
func (s *dupScan) sameName(a, b span, fold bool) bool {
	x, y := s.b[a.start:a.end], s.b[b.start:b.end]
	if a.plain && b.plain {
		if len(x) != len(y) {
			return false
		}
		if !fold {
			return string(x) == string(y) // no allocation
		}
		for i := range x {
			cx, cy := x[i], y[i]
			if 'A' <= cx && cx <= 'Z' {
				cx += 'a' - 'A'
			}
			if 'A' <= cy && cy <= 'Z' {
				cy += 'a' - 'A'
			}
			if cx != cy {
				return false
			}
		}
		return true
	}
	// Escapes or non-ASCII: compare rune by rune.
	for len(x) > 0 && len(y) > 0 {
		var rx, ry rune
		rx, x = nextRune(x)
		ry, y = nextRune(y)
		if rx == ry {
			continue
		}
		if !fold || !equalFoldRune(rx, ry) {
			return false
		}
	}
	return len(x) == 0 && len(y) == 0
}

func equalFoldRune(a, b rune) bool {
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

// nextRune decodes the first character of a JSON string's contents.
func nextRune(b []byte) (rune, []byte) {
	if b[0] != '\\' {
		r, n := utf8.DecodeRune(b)
		return r, b[n:]
	}
	if len(b) < 2 {
		return utf8.RuneError, nil
	}
	switch b[1] {
	case 'u':
		r, rest := hex4(b[2:])
		if utf16.IsSurrogate(r) && len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
			if r2, rest2 := hex4(rest[2:]); utf16.DecodeRune(r, r2) != utf8.RuneError {
				return utf16.DecodeRune(r, r2), rest2
			}
		}
		if utf16.IsSurrogate(r) {
			return utf8.RuneError, rest
		}
		return r, rest
	case 'b':
		return '\b', b[2:]
	case 'f':
		return '\f', b[2:]
	case 'n':
		return '\n', b[2:]
	case 'r':
		return '\r', b[2:]
	case 't':
		return '\t', b[2:]
	}
	return rune(b[1]), b[2:] // \" \\ \/
}

func hex4(b []byte) (rune, []byte) {
	if len(b) < 4 {
		return utf8.RuneError, nil
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return utf8.RuneError, b[4:]
		}
	}
	return r, b[4:]
}

// decodeName unescapes a member name (for messages and the map path).
func decodeName(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		var r rune
		r, b = nextRune(b)
		sb.WriteRune(r)
	}
	return sb.String()
}
