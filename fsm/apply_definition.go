package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/flowd/flowd/fsm/domain"
)

// Workflow definitions: a named, versioned workflow spec. A version, once
// stored, never changes (DefinitionPut refuses another spec under it); a
// run submitted by definition (SubmitDefinition) resolves the name to a
// version inside Apply, so "the latest" is the latest at the entry's place
// in the log on every replica, and the run records the version it froze.
//
//	df/<name>/<version8>   Definition (JSON), written once

var pfxDefinition = []byte("df/")

// Names never hold '/' (domain.ValidKey), so the prefix of a name is exact.
func definitionPrefix(name string) []byte { return cat(pfxDefinition, []byte(name), []byte("/")) }
func definitionKey(name string, version int) []byte {
	return cat(definitionPrefix(name), u64(uint64(version)))
}

// Definition is one stored version of a workflow definition.
type Definition struct {
	Name    string      `json:"name"`
	Version int         `json:"version"`
	Spec    domain.Spec `json:"spec"`
	Note    string      `json:"note,omitempty"`

	CreatedAt   int64  `json:"created_at"`
	CreateIndex uint64 `json:"create_index"`
}

// DefinitionPut stores Spec as version Version of definition Name (0: the
// next version). The spec's name is the definition's.
type DefinitionPut struct {
	Stamped
	Name    string      `json:"name"`
	Version int         `json:"version,omitempty"`
	Spec    domain.Spec `json:"spec"`
	Note    string      `json:"note,omitempty"`
}

// SubmitDefinition is a Submit whose spec is version Version of definition
// Definition (0: the latest when applied).
type SubmitDefinition struct {
	Stamped
	Definition string            `json:"definition"`
	Version    int               `json:"version,omitempty"`
	ID         string            `json:"id"`
	Input      json.RawMessage   `json:"input,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	IfFull     string            `json:"if_full,omitempty"`
	Nonce      string            `json:"nonce,omitempty"`
	StartAt    int64             `json:"start_at,omitempty"`
	DelayMS    int64             `json:"delay_ms,omitempty"`
}

func (*DefinitionPut) Type() MsgType    { return MsgDefinitionPut }
func (*SubmitDefinition) Type() MsgType { return MsgSubmitDefinition }

// DefinitionResult answers definition.put: the version stored (or found
// holding the same spec: Created false).
type DefinitionResult struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Created bool   `json:"created"`
}

// latestDefinition is the highest stored version of name (nil: none).
func latestDefinition(r Reader, name string) (*Definition, error) {
	var out *Definition
	var uerr error
	err := r.Scan(definitionPrefix(name), nil, true, func(_, v []byte) bool {
		out = new(Definition)
		uerr = unmarshal(v, out)
		return false
	})
	if err == nil {
		err = uerr
	}
	return out, err
}

// getDefinition is version v of name, or the latest when v is 0 (nil: none).
func getDefinition(r Reader, name string, v int) (*Definition, error) {
	if v == 0 {
		return latestDefinition(r, name)
	}
	return getJSON[Definition](r, definitionKey(name, v))
}

// sameSpec compares two specs as they would be frozen (defaults filled
// in), so leaving a default out does not make a new spec.
func sameSpec(a, b domain.Spec) bool {
	ea, err := marshal(a.NormalizeWith(0))
	must(err)
	eb, err := marshal(b.NormalizeWith(0))
	must(err)
	return bytes.Equal(ea, eb)
}

func (a *applier) applyDefinitionPut(c *DefinitionPut) any {
	if err := domain.ValidateDefinitionName(c.Name, a.limits); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if c.Version != 0 && !domain.ValidDefinitionVersion(c.Version) {
		return fmt.Errorf("%w: version %d must be from 1 (or leave it out for the next one)", ErrInvalidArgument, c.Version)
	}
	if c.Spec.Name != c.Name {
		return fmt.Errorf("%w: the workflow is named %q, the definition %q: they must be the same", ErrInvalidArgument, c.Spec.Name, c.Name)
	}
	if len(c.Note) > 1024 {
		return fmt.Errorf("%w: note is over 1024 bytes", ErrInvalidArgument)
	}
	c.Spec = a.versioned(c.Spec)
	if err := a.validSpec(c.Spec); err != nil {
		return err
	}
	latest, err := latestDefinition(a.tx, c.Name)
	must(err)
	latestV := 0
	if latest != nil {
		latestV = latest.Version
	}
	cmp := latest
	if c.Version != 0 {
		cmp, err = getDefinition(a.tx, c.Name, c.Version)
		must(err)
	}
	same := cmp != nil && sameSpec(cmp.Spec, c.Spec)
	outcome, v := domain.DecidePut(c.Version, latestV, cmp != nil, same)
	switch outcome {
	case domain.PutSame:
		return &DefinitionResult{Name: c.Name, Version: v}
	case domain.PutConflict:
		return fmt.Errorf("%w: definition %s already holds another spec (versions never change); put it without a version to store it as version %d",
			ErrInvalidArgument, domain.DefinitionRef(c.Name, v), latestV+1)
	case domain.PutGap:
		return fmt.Errorf("%w: definition %s: the next version is %d (latest %d); put it without a version to get the next one",
			ErrInvalidArgument, domain.DefinitionRef(c.Name, v), latestV+1, latestV)
	}
	a.put(definitionKey(c.Name, v), &Definition{Name: c.Name, Version: v, Spec: c.Spec, Note: c.Note, CreatedAt: a.now, CreateIndex: a.index})
	a.emit(Event{Kind: "definition", Name: c.Name, Transition: "put", To: domain.DefinitionRef(c.Name, v)})
	return &DefinitionResult{Name: c.Name, Version: v, Created: true}
}

func (a *applier) applySubmitDefinition(c *SubmitDefinition) any {
	if err := domain.ValidateDefinitionName(c.Definition, a.limits); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if c.Version != 0 && !domain.ValidDefinitionVersion(c.Version) {
		return fmt.Errorf("%w: version %d must be from 1 (or leave it out for the latest)", ErrInvalidArgument, c.Version)
	}
	if r := a.loadRun(c.ID); r != nil {
		return &SubmitResult{ID: r.ID, State: r.State, Created: c.Nonce != "" && c.Nonce == r.Nonce}
	}
	d, err := getDefinition(a.tx, c.Definition, c.Version)
	must(err)
	if d == nil {
		return definitionNotFound(c.Definition, c.Version)
	}
	sub := &Submit{Stamped: c.Stamped, ID: c.ID, Spec: d.Spec, Input: c.Input, Labels: c.Labels, IfFull: c.IfFull,
		Nonce: c.Nonce, StartAt: c.StartAt, DelayMS: c.DelayMS}
	res := a.applySubmit(sub)
	if sr, ok := res.(*SubmitResult); ok && sr.Created {
		r := a.loadRun(sr.ID)
		r.Definition, r.DefinitionVersion = d.Name, d.Version
	}
	return res
}

func definitionNotFound(name string, version int) error {
	if version == 0 {
		return fmt.Errorf("%w: definition %s; store it with `flowd def put FILE` or list them with `flowd def list`", ErrNotFound, name)
	}
	return fmt.Errorf("%w: definition %s; see its versions with `flowd def get %s --versions`", ErrNotFound, domain.DefinitionRef(name, version), name)
}

// Reads.

// DefinitionSummary is one definition: its latest version and how many
// versions it has.
type DefinitionSummary struct {
	Latest   Definition
	Versions int
}

// Definitions lists every definition by name with its latest version.
func (f *FSM) Definitions() ([]DefinitionSummary, error) {
	var out []DefinitionSummary
	err := f.View(func(r Reader) error {
		var uerr error
		err := r.Scan(pfxDefinition, nil, false, func(_, v []byte) bool {
			var d Definition
			if uerr = unmarshal(v, &d); uerr != nil {
				return false
			}
			if n := len(out); n > 0 && out[n-1].Latest.Name == d.Name {
				out[n-1].Latest = d // versions ascend within a name
				out[n-1].Versions++
				return true
			}
			out = append(out, DefinitionSummary{Latest: d, Versions: 1})
			return true
		})
		if err == nil {
			err = uerr
		}
		return err
	})
	slices.SortFunc(out, func(a, b DefinitionSummary) int { return strings.Compare(a.Latest.Name, b.Latest.Name) })
	return out, err
}

// GetDefinition returns version v of name (0: the latest); ErrNotFound if
// none.
func (f *FSM) GetDefinition(name string, v int) (*Definition, error) {
	var d *Definition
	err := f.View(func(r Reader) (err error) {
		d, err = getDefinition(r, name, v)
		return err
	})
	if err == nil && d == nil {
		err = definitionNotFound(name, v)
	}
	return d, err
}

// DefinitionVersions lists the versions of name, oldest first.
func (f *FSM) DefinitionVersions(name string) ([]Definition, error) {
	var out []Definition
	err := f.View(func(r Reader) error {
		var uerr error
		err := r.Scan(definitionPrefix(name), nil, false, func(_, v []byte) bool {
			var d Definition
			if uerr = unmarshal(v, &d); uerr != nil {
				return false
			}
			out = append(out, d)
			return true
		})
		if err == nil {
			err = uerr
		}
		return err
	})
	return out, err
}
