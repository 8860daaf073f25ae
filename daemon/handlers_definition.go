package daemon

import (
	"context"
	"fmt"

	"github.com/flowd/flowd/fsm"
	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/expr"
	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/rpc/defrpc"
)

// Workflow definition methods. A run submitted by definition resolves the
// name inside the state machine (fsm.SubmitDefinition), so "the latest
// version" is the latest at the submit's place in the log.

// definitionReader is the FSM's definition reads (an addition to
// stateReader kept here, so fakes of the seam need not implement it).
type definitionReader interface {
	Definitions() ([]fsm.DefinitionSummary, error)
	GetDefinition(name string, version int) (*fsm.Definition, error)
	DefinitionVersions(name string) ([]fsm.Definition, error)
}

func (a *Agent) definitions() (definitionReader, error) {
	r, ok := a.state.(definitionReader)
	if !ok {
		return nil, fmt.Errorf("this agent's state has no workflow definitions")
	}
	return r, nil
}

func (a *Agent) definitionPut(ctx context.Context, p defrpc.PutParams) (defrpc.PutResult, error) {
	if len(p.Workflow) == 0 || string(p.Workflow) == "null" {
		return defrpc.PutResult{}, invalid("workflow is required: the spec to store")
	}
	if p.Name != "" {
		if err := domain.ValidateDefinitionName(p.Name, domain.DefaultLimits); err != nil {
			return defrpc.PutResult{}, invalid("%v", err)
		}
	}
	if p.Version != 0 && !domain.ValidDefinitionVersion(p.Version) {
		return defrpc.PutResult{}, invalid("version %d must be from 1 (or leave it out for the next one)", p.Version)
	}
	ctx, cancel := withTimeout(ctx, writeTimeout)
	defer cancel()
	return onLeader(ctx, a.proxy, rpc.MethodDefinitionPut, p, func(ctx context.Context) (defrpc.PutResult, error) {
		a.raiseIfFresh(ctx)
		spec, err := domain.ParseSpec(p.Workflow, a.state.Limits())
		err = expr.Validate(spec, err) // the when conditions compile
		if err == nil {
			err = fsm.SpecNeedsVersion(spec, a.state.ActiveVersion()) // refused before it is proposed
		}
		if err != nil {
			return defrpc.PutResult{}, err
		}
		name := p.Name
		switch {
		case name == "":
			name = spec.Name
		case spec.Name != name:
			return defrpc.PutResult{}, invalid("name %q and the workflow's name %q differ: give one of them, or the same", name, spec.Name)
		}
		if err := domain.ValidateDefinitionName(name, domain.DefaultLimits); err != nil {
			return defrpc.PutResult{}, invalid("%v (the definition is named after its workflow)", err)
		}
		res, idx, err := propose[fsm.DefinitionResult](ctx, a.prop, &fsm.DefinitionPut{Name: name, Version: p.Version, Spec: spec, Note: p.Note}, alone)
		if err != nil {
			return defrpc.PutResult{}, err
		}
		return defrpc.PutResult{Name: res.Name, Version: res.Version, Created: res.Created, Index: idx}, nil
	})
}

func toDefinition(d *fsm.Definition) defrpc.Definition {
	return defrpc.Definition{Name: d.Name, Version: d.Version, Tasks: len(d.Spec.Tasks), Note: d.Note, CreatedAt: ms(d.CreatedAt)}
}

func (a *Agent) definitionGet(_ context.Context, p defrpc.GetParams) (defrpc.Definition, error) {
	if p.Name == "" {
		return defrpc.Definition{}, invalid("name is required (name or name@version)")
	}
	name, v, err := domain.ParseDefinitionRef(p.Name, domain.DefaultLimits)
	if err != nil {
		return defrpc.Definition{}, invalid("%v", err)
	}
	switch {
	case p.Version != 0 && !domain.ValidDefinitionVersion(p.Version):
		return defrpc.Definition{}, invalid("version %d must be from 1 (or leave it out for the latest)", p.Version)
	case p.Version != 0 && v != 0 && p.Version != v:
		return defrpc.Definition{}, invalid("%s and version %d differ: give one of them", p.Name, p.Version)
	case p.Version != 0:
		v = p.Version
	}
	dr, err := a.definitions()
	if err != nil {
		return defrpc.Definition{}, err
	}
	d, err := dr.GetDefinition(name, v)
	if err != nil {
		return defrpc.Definition{}, err
	}
	latest, err := dr.GetDefinition(name, 0)
	if err != nil {
		return defrpc.Definition{}, err
	}
	out := toDefinition(d)
	spec := d.Spec
	out.Spec, out.Latest = &spec, latest.Version
	if p.Versions {
		vs, err := dr.DefinitionVersions(name)
		if err != nil {
			return defrpc.Definition{}, err
		}
		for i := range vs {
			out.Versions = append(out.Versions, toDefinition(&vs[i]))
		}
	}
	return out, nil
}

func (a *Agent) definitionList(context.Context, struct{}) (defrpc.ListResult, error) {
	dr, err := a.definitions()
	if err != nil {
		return defrpc.ListResult{}, err
	}
	ds, err := dr.Definitions()
	if err != nil {
		return defrpc.ListResult{}, err
	}
	out := defrpc.ListResult{Definitions: make([]defrpc.Summary, 0, len(ds))}
	for _, d := range ds {
		out.Definitions = append(out.Definitions, defrpc.Summary{Name: d.Latest.Name, Latest: d.Latest.Version, Versions: d.Versions,
			Tasks: len(d.Latest.Spec.Tasks), Note: d.Latest.Note, UpdatedAt: ms(d.Latest.CreatedAt)})
	}
	return out, nil
}
