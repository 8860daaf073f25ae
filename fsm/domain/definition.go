package domain

import (
	"fmt"
	"strconv"
	"strings"
)

// Workflow definitions: a named, versioned workflow spec stored in the
// cluster. Versions count from 1 and never change once stored; a run
// submitted by definition freezes the version it resolved to.

// MaxDefinitionVersion bounds a version number (it must fit a key and JSON
// numbers exactly).
const MaxDefinitionVersion = 1 << 31

// ValidateDefinitionName checks a definition name: a key (letters, digits,
// '_', '.', ':' or '-'), so "name@version" is unambiguous.
func ValidateDefinitionName(name string, lim Limits) error {
	if !ValidKey(name) || len(name) > lim.MaxKeyLen {
		return fmt.Errorf("definition name %q must be 1-%d letters, digits, '_', '.', ':' or '-'", name, lim.MaxKeyLen)
	}
	return nil
}

// ValidDefinitionVersion reports whether v is a stored version number
// (0 means "not given": the latest on reads, the next one on a put).
func ValidDefinitionVersion(v int) bool { return v >= 1 && v <= MaxDefinitionVersion }

// ParseDefinitionRef splits "name" or "name@version"; version 0 means the
// latest.
func ParseDefinitionRef(ref string, lim Limits) (name string, version int, err error) {
	name, v, hasVersion := strings.Cut(ref, "@")
	if err := ValidateDefinitionName(name, lim); err != nil {
		return "", 0, err
	}
	if !hasVersion {
		return name, 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || !ValidDefinitionVersion(n) {
		return "", 0, fmt.Errorf("definition %q: version %q must be a number from 1 (or leave out @version for the latest)", ref, v)
	}
	return name, n, nil
}

// DefinitionRef renders name@version.
func DefinitionRef(name string, version int) string { return name + "@" + strconv.Itoa(version) }

// PutOutcome is what a definition put does, decided from the latest stored
// version and whether the spec equals the one stored under the version
// asked for.
type PutOutcome int

const (
	// PutCreate stores the spec as a new version.
	PutCreate PutOutcome = iota
	// PutSame changes nothing: that version holds this very spec (a
	// retried put).
	PutSame
	// PutConflict is refused: that version holds another spec.
	PutConflict
	// PutGap is refused: the version skips ahead of latest+1.
	PutGap
)

// DecidePut is the rule of definition.put. asked is the version asked for
// (0: the next one), latest the latest stored (0: none), sameAsAsked
// whether the spec equals the one stored under asked (or, when asked is 0,
// under latest). It returns the outcome and the version concerned.
//
// A put without a version whose spec equals the latest is a retry, not a
// new version: a put whose answer was lost can be repeated safely.
func DecidePut(asked, latest int, exists, sameAsAsked bool) (PutOutcome, int) {
	switch {
	case asked == 0 && latest > 0 && sameAsAsked:
		return PutSame, latest
	case asked == 0:
		return PutCreate, latest + 1
	case exists && sameAsAsked:
		return PutSame, asked
	case exists:
		return PutConflict, asked
	case asked != latest+1:
		return PutGap, asked
	}
	return PutCreate, asked
}
