package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// toJSON returns JSON as is and converts YAML (a superset) to JSON. Text
// that starts with { or [ is JSON: invalid JSON is refused with its line
// and column, not read again as YAML (which takes a trailing comma, a
// comment or an unquoted key that JSON does not). A YAML error names the
// line where the document stops parsing.
func toJSON(b []byte) (json.RawMessage, error) {
	t := bytes.TrimSpace(b)
	if bytes.HasPrefix(t, []byte("{")) || bytes.HasPrefix(t, []byte("[")) {
		if err := jsonSyntax(t); err != nil {
			return nil, err
		}
		return json.RawMessage(t), nil
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, yamlError(b, err)
	}
	return json.RawMessage(js), nil
}

// jsonSyntaxError is JSON that does not parse, with where.
type jsonSyntaxError struct {
	Line, Col int
	Err       error
}

func (e *jsonSyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at line %d, column %d: %v", e.Line, e.Col, e.Err)
}

func (e *jsonSyntaxError) Unwrap() error { return e.Err }

// jsonSyntax checks b is one JSON value, naming the line and column of the
// first error (a comma before } or ] is said to be a trailing comma).
func jsonSyntax(b []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	err := dec.Decode(&v)
	if err == nil {
		if dec.More() {
			off := int(dec.InputOffset())
			line, col := lineCol(b, off)
			return &jsonSyntaxError{Line: line, Col: col, Err: errors.New("text after the JSON value")}
		}
		return nil
	}
	off := len(b)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = int(se.Offset) - 1
	}
	off = max(0, min(off, len(b)))
	line, col := lineCol(b, off)
	msg := err.Error()
	if prev := bytes.TrimRight(b[:off], " \t\r\n"); len(prev) > 0 && prev[len(prev)-1] == ',' && off < len(b) && (b[off] == '}' || b[off] == ']') {
		msg = "a trailing comma before " + string(b[off]) + " (JSON allows none)"
	}
	return &jsonSyntaxError{Line: line, Col: col, Err: errors.New(msg)}
}

// lineCol is the 1-based line and column of byte offset off in b.
func lineCol(b []byte, off int) (line, col int) {
	before := b[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = off - bytes.LastIndexByte(before, '\n')
	return line, col
}

var yamlLineRe = regexp.MustCompile(`line (\d+):`)

// maxYAMLLineSearch bounds the re-parsing yamlError does (lines).
const maxYAMLLineSearch = 5000

// yamlError rewrites the YAML parser's error to name the line where the
// document stops parsing: the parser reports the line of the construct
// it was inside (the task a misindented key belongs to, the end of the
// file for an unclosed quote), not the line at fault. That line is the
// last one whose preceding lines still parse.
func yamlError(b []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	m := yamlLineRe.FindStringSubmatchIndex(msg)
	lines := strings.SplitAfter(string(b), "\n")
	if m == nil || len(lines) > maxYAMLLineSearch {
		return errors.New(msg)
	}
	at := 0 // lines[:at] parse
	for n := len(lines) - 1; n >= 0; n-- {
		if _, perr := yaml.YAMLToJSON([]byte(strings.Join(lines[:n], ""))); perr == nil {
			at = n
			break
		}
	}
	if at >= len(lines) {
		return errors.New(msg)
	}
	text := strings.TrimRight(lines[at], "\r\n")
	if len(text) > 80 {
		text = text[:80] + "…"
	}
	return errors.New(msg[:m[0]] + fmt.Sprintf("line %d: %q:", at+1, text) + msg[m[1]:])
}
