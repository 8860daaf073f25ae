package domain

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Label selectors: the subset of Kubernetes' label-selector syntax that
// run.list's selector parameter takes. Terms are comma-separated and every
// term must hold:
//
//	k=v, k==v   the run has label k with value v
//	k!=v        the run has no label k, or has it with another value
//	k           the run has label k (any value)
//	!k          the run has no label k
//
// Spaces around keys, values and operators are ignored. A value cannot
// hold '=', '!' or ',' (the labels parameter matches any value exactly).
// An empty selector has no terms and takes every run.

// Label bounds: run.submit rejects labels outside them, and a selector
// naming a key or value outside them could never match, so it is refused.
const (
	MaxLabelKeyBytes   = 128
	MaxLabelValueBytes = 1024
	// MaxSelectorTerms bounds the terms of one selector.
	MaxSelectorTerms = 64
)

// SelectorOp is what a selector term asks of a label.
type SelectorOp uint8

// The selector term kinds.
const (
	SelEquals    SelectorOp = iota + 1 // k=v, k==v
	SelNotEquals                       // k!=v
	SelExists                          // k
	SelNotExists                       // !k
)

// SelectorTerm is one term of a selector; Value is empty for SelExists and
// SelNotExists.
type SelectorTerm struct {
	Op    SelectorOp
	Key   string
	Value string
}

// Selector is a parsed label selector: every term must hold.
type Selector []SelectorTerm

// Holds reports whether labels satisfy the term.
func (t SelectorTerm) Holds(labels map[string]string) bool {
	v, ok := labels[t.Key]
	switch t.Op {
	case SelEquals:
		return ok && v == t.Value
	case SelNotEquals:
		return !ok || v != t.Value
	case SelExists:
		return ok
	case SelNotExists:
		return !ok
	}
	return false
}

// String gives the term in selector syntax (k==v is written k=v).
func (t SelectorTerm) String() string {
	switch t.Op {
	case SelEquals:
		return t.Key + "=" + t.Value
	case SelNotEquals:
		return t.Key + "!=" + t.Value
	case SelNotExists:
		return "!" + t.Key
	}
	return t.Key
}

// Matches reports whether labels satisfy every term.
func (s Selector) Matches(labels map[string]string) bool {
	for _, t := range s {
		if !t.Holds(labels) {
			return false
		}
	}
	return true
}

// String gives the selector in selector syntax.
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, t := range s {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}

// ParseSelector parses a label selector. An error wraps ErrInvalidArgument
// and names the term and what is wrong with it.
func ParseSelector(s string) (Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if n := strings.Count(s, ",") + 1; n > MaxSelectorTerms {
		return nil, fmt.Errorf("%w: selector has %d terms, more than the limit of %d; narrow it or page with fewer terms",
			ErrInvalidArgument, n, MaxSelectorTerms)
	}
	raw := strings.Split(s, ",")
	out := make(Selector, 0, len(raw))
	for i, r := range raw {
		t, err := parseTerm(r)
		if err != nil {
			return nil, fmt.Errorf("%w: selector term %d %q: %s", ErrInvalidArgument, i+1, truncateText(strings.TrimSpace(r), 60), err)
		}
		out = append(out, t)
	}
	return out, nil
}

// selectorError is what is wrong with one term (the caller names it).
type selectorError string

func (e selectorError) Error() string { return string(e) }

func parseTerm(r string) (SelectorTerm, error) {
	r = strings.TrimSpace(r)
	var t SelectorTerm
	switch {
	case r == "":
		return t, selectorError("empty term (two commas, or a comma at an end); remove it")
	case strings.HasPrefix(r, "!") && !strings.Contains(r, "="):
		t = SelectorTerm{Op: SelNotExists, Key: strings.TrimSpace(r[1:])}
	case strings.Contains(r, "!="):
		k, v, _ := strings.Cut(r, "!=")
		t = SelectorTerm{Op: SelNotEquals, Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)}
	case strings.Contains(r, "=="):
		k, v, _ := strings.Cut(r, "==")
		t = SelectorTerm{Op: SelEquals, Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)}
	case strings.Contains(r, "="):
		k, v, _ := strings.Cut(r, "=")
		t = SelectorTerm{Op: SelEquals, Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)}
	default:
		t = SelectorTerm{Op: SelExists, Key: r}
	}
	if t.Key == "" {
		return t, selectorError("empty key; write k=v, k==v, k!=v, k or !k")
	}
	if err := checkSelectorText("key", t.Key, MaxLabelKeyBytes, "write k=v, k==v, k!=v, k or !k"); err != nil {
		return t, err
	}
	return t, checkSelectorText("value", t.Value, MaxLabelValueBytes, "match such a value with the labels parameter")
}

// checkSelectorText checks a selector term's key or value (what) against
// the label limit, the operators it may not hold (hint says what to do
// instead) and CleanText.
func checkSelectorText(what, s string, limit int, hint string) error {
	switch {
	case len(s) > limit:
		return selectorError(fmt.Sprintf("%s of %d bytes exceeds the label %s limit of %d", what, len(s), what, limit))
	case strings.ContainsAny(s, "=!"):
		return selectorError(fmt.Sprintf("the %s holds '=' or '!'; %s", what, hint))
	case !CleanText(s):
		return selectorError(fmt.Sprintf("the %s must be UTF-8 without NUL or control characters", what))
	}
	return nil
}

// CleanText reports whether s is valid UTF-8 without NUL or other control
// characters: what a label key or value (and a selector's) may hold.
func CleanText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0
}

// truncateText shortens s to at most n bytes on a rune boundary, marking the
// cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
