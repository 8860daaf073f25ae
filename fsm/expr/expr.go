package expr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/flowd/flowd/fsm/domain"
)

// CostLimit bounds one evaluation's cost in CEL's units (about one per
// step: a comparison, a field selection, one element of a list walked).
const CostLimit = 1_000_000

// maxPrograms bounds the compiled programs kept for reuse.
const maxPrograms = 512

// Dep is one dependency of the task whose condition is evaluated.
type Dep struct {
	State  domain.TaskState
	Result json.RawMessage
}

// Env is what a condition sees: `input` (the run's input, JSON),
// `labels` (the run's labels, map(string, string)) and `deps` (each
// dependency by key: `deps.<key>.state`, `deps.<key>.result`).
type Env struct {
	Input  json.RawMessage
	Labels map[string]string
	Deps   map[string]Dep
}

var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("input", cel.DynType),
		cel.Variable("labels", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("deps", cel.MapType(cel.StringType, cel.DynType)),
		cel.ParserExpressionSizeLimit(domain.MaxWhenBytes),
		cel.ParserRecursionLimit(64),
	)
})

var programs struct {
	sync.Mutex
	m map[progKey]cel.Program
}

// The kinds of expression: a condition gives a bool, a loop a list, a
// child run's input any JSON value.
type kind uint8

const (
	condition kind = iota
	list
	anyValue
)

type progKey struct {
	src  string
	kind kind
}

// compile parses and type-checks src as a k; the error is the parser's or
// the checker's message.
func compile(src string, k kind) (cel.Program, error) {
	programs.Lock()
	p, ok := programs.m[progKey{src, k}]
	programs.Unlock()
	if ok {
		return p, nil
	}
	e, err := env()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("the expression is empty")
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	out := ast.OutputType()
	switch {
	case out.IsExactType(cel.DynType):
	case k == condition && !out.IsExactType(cel.BoolType):
		return nil, fmt.Errorf("the condition is of type %s; it must be a bool", out)
	case k == list && out.Kind() != types.ListKind:
		return nil, fmt.Errorf("for_each is of type %s; it must be a list", out)
	}
	p, err = e.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, err
	}
	programs.Lock()
	if programs.m == nil || len(programs.m) >= maxPrograms {
		programs.m = make(map[progKey]cel.Program)
	}
	programs.m[progKey{src, k}] = p
	programs.Unlock()
	return p, nil
}

// Check compiles and type-checks a condition.
func Check(src string) error {
	_, err := compile(src, condition)
	return err
}

// CheckList compiles and type-checks a for_each expression.
func CheckList(src string) error {
	_, err := compile(src, list)
	return err
}

// CheckValue compiles and type-checks a child run's input expression.
func CheckValue(src string) error {
	_, err := compile(src, anyValue)
	return err
}

// EvalJSON evaluates the input expression src in env: its value as JSON
// (objects with their keys sorted). An error (a missing field, a value
// JSON cannot hold, the cost limit) is the expression's failure.
func EvalJSON(src string, e Env) (json.RawMessage, error) {
	out, err := eval(src, anyValue, e)
	if err != nil {
		return nil, err
	}
	v, err := toJSON(out)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Eval evaluates the condition src in env. An error (a missing field, a
// wrong type at run time, the cost limit, a result that is not a bool)
// is the condition's failure.
func Eval(src string, e Env) (bool, error) {
	out, err := eval(src, condition, e)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %s (%s), not a bool", out.Type().TypeName(), types.Format(out))
	}
	return bool(b), nil
}

// EvalList evaluates the for_each expression src in env: the elements of
// the list it gives, each as JSON (objects with their keys sorted). At
// most max elements: more is an error naming the limit.
func EvalList(src string, e Env, max int) ([]json.RawMessage, error) {
	out, err := eval(src, list, e)
	if err != nil {
		return nil, err
	}
	l, ok := out.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("for_each gave %s (%s), not a list", out.Type().TypeName(), types.Format(out))
	}
	n, ok := l.Size().(types.Int)
	if !ok {
		return nil, errors.New("for_each gave a list of unknown size")
	}
	if int(n) > max {
		return nil, fmt.Errorf("for_each gave %d elements; the run has room for %d more tasks (limit of tasks per run)", n, max)
	}
	elems := make([]json.RawMessage, 0, int(n))
	for it := l.Iterator(); it.HasNext() == types.True; {
		v, err := toJSON(it.Next())
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		elems = append(elems, b)
	}
	return elems, nil
}

// toJSON turns a CEL value into a Go value encoding/json writes
// deterministically (maps are written with sorted keys).
func toJSON(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.String:
		return string(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Null:
		return nil, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a map key of type %s cannot be JSON", k.Type().TypeName())
			}
			val, err := toJSON(x.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = val
		}
		return out, nil
	case traits.Lister:
		var out []any
		for it := x.Iterator(); it.HasNext() == types.True; {
			val, err := toJSON(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s cannot be JSON", v.Type().TypeName())
}

func eval(src string, k kind, e Env) (ref.Val, error) {
	p, err := compile(src, k)
	if err != nil {
		return nil, err
	}
	input, err := fromJSON(e.Input)
	if err != nil {
		return nil, fmt.Errorf("run input: %w", err)
	}
	deps := make(map[ref.Val]ref.Val, len(e.Deps))
	for k, d := range e.Deps {
		res, err := fromJSON(d.Result)
		if err != nil {
			return nil, fmt.Errorf("result of %s: %w", k, err)
		}
		deps[types.String(k)] = newMap(map[ref.Val]ref.Val{
			types.String("state"):  types.String(string(d.State)),
			types.String("result"): res,
		})
	}
	labels := make(map[ref.Val]ref.Val, len(e.Labels))
	for k, v := range e.Labels {
		labels[types.String(k)] = types.String(v)
	}
	out, _, err := p.Eval(map[string]any{"input": input, "labels": newMap(labels), "deps": newMap(deps)})
	return out, err
}

// CheckSpec compiles every expression of s (conditions, loops, child-run
// inputs, and those of inline child specs), as problems located at their
// paths (tasks[i].when).
func CheckSpec(s domain.Spec) []domain.Problem { return checkSpecAt(s, "") }

// checkSpecAt is CheckSpec with paths under prefix (an inline child
// spec's: "tasks[0].spec.").
func checkSpecAt(s domain.Spec, prefix string) []domain.Problem {
	var ps []domain.Problem
	for i, t := range s.Tasks {
		if t.When != "" {
			if err := Check(t.When); err != nil {
				ps = append(ps, domain.Problem{Code: domain.CodeBadCondition, Path: fmt.Sprintf("%stasks[%d].when", prefix, i),
					Message: "when does not compile: " + err.Error()})
			}
		}
		if t.ForEach != "" {
			if err := CheckList(t.ForEach); err != nil {
				ps = append(ps, domain.Problem{Code: domain.CodeBadLoop, Path: fmt.Sprintf("%stasks[%d].for_each", prefix, i),
					Message: "for_each does not compile: " + err.Error()})
			}
		}
	}
	for _, part := range []struct {
		name  string
		tasks []domain.TaskSpec
	}{{"tasks", s.Tasks}, {"finally", s.Finally}} {
		for i, t := range part.tasks {
			if t.IsRunTask() && t.Spec != nil {
				ps = append(ps, checkSpecAt(*t.Spec, fmt.Sprintf("%s%s[%d].spec.", prefix, part.name, i))...)
			}
			if src := t.ChildInputExpr(); src != "" {
				if err := CheckValue(src); err != nil {
					ps = append(ps, domain.Problem{Code: domain.CodeBadChild, Path: fmt.Sprintf("%s%s[%d].input", prefix, part.name, i),
						Message: "the child run's input expression does not compile: " + err.Error() + " (a run task's string input is a CEL expression; to pass a string, quote it: \"'text'\")"})
				}
			}
		}
	}
	return ps
}

// Validate adds the problems of s's conditions to err, the result of
// parsing or validating s (nil, a *domain.SpecError or another error,
// returned as it is).
func Validate(s domain.Spec, err error) error {
	var se *domain.SpecError
	if err != nil && !errors.As(err, &se) {
		return err
	}
	ps := CheckSpec(s)
	if len(ps) == 0 {
		return err
	}
	if se == nil {
		return &domain.SpecError{Problems: ps}
	}
	return &domain.SpecError{Problems: append(slices.Clone(se.Problems), ps...)}
}

// fromJSON turns a JSON value into CEL values (nil or empty: null).
func fromJSON(raw json.RawMessage) (ref.Val, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return types.NullValue, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := value(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func value(d *json.Decoder) (ref.Val, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			m := map[ref.Val]ref.Val{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := value(d)
				if err != nil {
					return nil, err
				}
				m[types.String(k)] = v
			}
			_, err := d.Token()
			return newMap(m), err
		case '[':
			var l []ref.Val
			for d.More() {
				v, err := value(d)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := d.Token()
			return types.NewRefValList(types.DefaultTypeAdapter, l), err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case string:
		return types.String(x), nil
	case bool:
		return types.Bool(x), nil
	case nil:
		return types.NullValue, nil
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			if n, err := x.Int64(); err == nil {
				return types.Int(n), nil
			}
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return types.Double(f), nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// sortedMap is a CEL map whose iteration visits its keys in sorted order
// (CEL's own maps iterate in Go's map order, which differs between runs).
type sortedMap struct {
	traits.Mapper
	keys []ref.Val
}

func newMap(m map[ref.Val]ref.Val) ref.Val {
	keys := make([]ref.Val, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ref.Val) int { return strings.Compare(string(a.(types.String)), string(b.(types.String))) })
	return sortedMap{Mapper: types.NewRefValMap(types.DefaultTypeAdapter, m), keys: keys}
}

// Iterator implements traits.Iterable in key order.
func (m sortedMap) Iterator() traits.Iterator {
	return types.NewRefValList(types.DefaultTypeAdapter, m.keys).Iterator()
}
