package domain

import (
	"errors"
	"fmt"
	"slices"
)

// EdgeKind classifies an edge for the validator: only Retry and Compensation
// edges may leave a settled state.
type EdgeKind uint8

const (
	// Forward edges move a run or task towards completion.
	Forward EdgeKind = iota
	// Retry edges leave a settled failure because attempts remain; they are
	// taken in the same log entry as the failure itself.
	Retry
	// Compensation edges undo finished work (saga revert).
	Compensation
)

// Edge is one named transition. An edge may start from several states and
// always ends in one.
type Edge[S ~string] struct {
	Name string
	From []S
	To   S
	Kind EdgeKind
}

// Machine is a state machine described as data. Tables are built once, at
// package init, and validated there: a broken table is a programming error
// and stops the process before it can apply anything.
//
// Terminal states come in two strengths, because a finished task or run can
// still be undone by a saga revert:
//   - Final states have no outgoing edge at all (cancelled, reverted, and a
//     succeeded run).
//   - Settled states are finished for forward execution; only Retry and
//     Compensation edges leave them (a succeeded or failed task, a failed run).
//
// A Machine is immutable after construction and safe for concurrent use.
type Machine[S ~string] struct {
	Name    string
	Initial S
	States  []S
	Final   []S
	Settled []S
	Edges   []Edge[S]

	byName map[string]int
}

// ErrIllegalTransition is returned when an edge is not in a machine's table
// or does not start from the current state. It is a caller bug, reported
// before anything is proposed; a lost race is never this error.
var ErrIllegalTransition = errors.New("illegal transition")

// Validation problems reported by Machine.Validate.
var (
	ErrDuplicateEdge    = errors.New("duplicate edge name")
	ErrUnknownState     = errors.New("state not in the machine's enum")
	ErrEdgeFromFinal    = errors.New("edge leaves a final state")
	ErrEdgeFromSettled  = errors.New("forward edge leaves a settled state")
	ErrDeadEnd          = errors.New("non-terminal state has no outgoing edge")
	ErrUnreachableState = errors.New("state unreachable from the initial state")
)

// NewMachine builds and validates a machine; it panics on an invalid table,
// which can only happen at package init.
func NewMachine[S ~string](m Machine[S]) *Machine[S] {
	if err := m.Validate(); err != nil {
		panic(fmt.Sprintf("domain: invalid %s machine: %v", m.Name, err))
	}
	m.index()
	return &m
}

func (m *Machine[S]) index() {
	m.byName = make(map[string]int, len(m.Edges))
	for i, e := range m.Edges {
		m.byName[e.Name] = i
	}
}

// Validate checks the table and returns every problem found, joined.
func (m *Machine[S]) Validate() error {
	var errs []error
	known := func(s S, where string) bool {
		if !slices.Contains(m.States, s) {
			errs = append(errs, fmt.Errorf("%w: %q in %s", ErrUnknownState, s, where))
			return false
		}
		return true
	}
	known(m.Initial, "initial")
	for _, s := range m.Final {
		known(s, "final set")
	}
	for _, s := range m.Settled {
		known(s, "settled set")
	}
	seen := map[string]bool{}
	out := map[S]int{}
	for _, e := range m.Edges {
		if seen[e.Name] {
			errs = append(errs, fmt.Errorf("%w: %q", ErrDuplicateEdge, e.Name))
		}
		seen[e.Name] = true
		known(e.To, "edge "+e.Name)
		for _, f := range e.From {
			if !known(f, "edge "+e.Name) {
				continue
			}
			out[f]++
			if slices.Contains(m.Final, f) {
				errs = append(errs, fmt.Errorf("%w: %s leaves %q", ErrEdgeFromFinal, e.Name, f))
			}
			if slices.Contains(m.Settled, f) && e.Kind == Forward {
				errs = append(errs, fmt.Errorf("%w: %s leaves %q", ErrEdgeFromSettled, e.Name, f))
			}
		}
	}
	for _, s := range m.States {
		if out[s] == 0 && !slices.Contains(m.Final, s) && !slices.Contains(m.Settled, s) {
			errs = append(errs, fmt.Errorf("%w: %q", ErrDeadEnd, s))
		}
	}
	// Reachability over all edges from the initial state.
	reach := map[S]bool{m.Initial: true}
	for changed := true; changed; {
		changed = false
		for _, e := range m.Edges {
			if reach[e.To] {
				continue
			}
			for _, f := range e.From {
				if reach[f] {
					reach[e.To] = true
					changed = true
					break
				}
			}
		}
	}
	for _, s := range m.States {
		if !reach[s] {
			errs = append(errs, fmt.Errorf("%w: %q", ErrUnreachableState, s))
		}
	}
	return errors.Join(errs...)
}

// HasState reports whether s is in the machine's enum.
func (m *Machine[S]) HasState(s S) bool { return slices.Contains(m.States, s) }

// IsFinal reports whether s is a final state.
func (m *Machine[S]) IsFinal(s S) bool { return slices.Contains(m.Final, s) }

// IsSettled reports whether s is a settled state.
func (m *Machine[S]) IsSettled(s S) bool { return slices.Contains(m.Settled, s) }

// Edge returns the edge called name.
func (m *Machine[S]) Edge(name string) (Edge[S], bool) {
	i, ok := m.byName[name]
	if !ok {
		return Edge[S]{}, false
	}
	return m.Edges[i], true
}

// Can reports whether edge name may be taken from state from.
func (m *Machine[S]) Can(from S, name string) bool {
	e, ok := m.Edge(name)
	return ok && slices.Contains(e.From, from)
}

// Step returns the state reached by taking edge name from state from, or an
// error wrapping ErrIllegalTransition.
func (m *Machine[S]) Step(from S, name string) (S, error) {
	e, ok := m.Edge(name)
	if !ok {
		return from, fmt.Errorf("%w: %s has no edge %q", ErrIllegalTransition, m.Name, name)
	}
	if !slices.Contains(e.From, from) {
		return from, fmt.Errorf("%w: %s edge %q cannot leave %q", ErrIllegalTransition, m.Name, name, from)
	}
	return e.To, nil
}

// EdgesFrom lists the names of the edges that may leave s, in table order.
func (m *Machine[S]) EdgesFrom(s S) []string {
	var names []string
	for _, e := range m.Edges {
		if slices.Contains(e.From, s) {
			names = append(names, e.Name)
		}
	}
	return names
}

// EdgeBetween returns the first edge in table order that leads from -> to.
func (m *Machine[S]) EdgeBetween(from, to S) (string, bool) {
	for _, e := range m.Edges {
		if e.To == to && slices.Contains(e.From, from) {
			return e.Name, true
		}
	}
	return "", false
}
