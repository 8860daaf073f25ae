package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/expr"
)

func init() { commands = append(commands, validateCommand) }

var validateCommand = &cli.Command{
	Name:      "validate",
	Usage:     "check a workflow file offline (YAML or JSON) and list every problem",
	ArgsUsage: "FILE (- for stdin)",
	Description: "Prints \"valid: N tasks\", or every problem as PATH: MESSAGE (CODE) and exits 1.\n" +
		"No agent is needed; the agents apply the same rules on submit.",
	Action: validateAction,
}

// validation is the --output json form.
type validation struct {
	Valid    bool             `json:"valid"`
	Name     string           `json:"name,omitempty"`
	Tasks    int              `json:"tasks"`
	Problems []domain.Problem `json:"problems"`
}

// CodeBadYAML: the file is neither JSON nor YAML.
const CodeBadYAML = "bad_yaml"

// validateSpec decodes and validates a workflow file's content.
func validateSpec(b []byte) validation {
	js, err := toJSON(b)
	if err != nil {
		code := CodeBadYAML
		if _, ok := errors.AsType[*jsonSyntaxError](err); ok {
			code = domain.CodeBadJSON
		}
		return validation{Problems: []domain.Problem{{Code: code, Path: "$", Message: err.Error()}}}
	}
	spec, err := domain.ParseSpec(js, domain.DefaultLimits)
	err = expr.Validate(spec, err) // the when conditions compile
	if err != nil {
		if se, ok := errors.AsType[*domain.SpecError](err); ok {
			return validation{Name: spec.Name, Tasks: len(spec.Tasks), Problems: se.Problems}
		}
		return validation{Problems: []domain.Problem{{Code: domain.CodeBadJSON, Path: "$", Message: err.Error()}}}
	}
	return validation{Valid: true, Name: spec.Name, Tasks: len(spec.Tasks), Problems: []domain.Problem{}}
}

func validateAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "FILE"); err != nil {
		return err
	}
	b, err := readFileArg(cCtx, cCtx.Args().First())
	if err != nil {
		return err
	}
	v := validateSpec(b)
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		if err := printJSON(w, v); err != nil {
			return err
		}
	} else if v.Valid {
		noun := "tasks"
		if v.Tasks == 1 {
			noun = "task"
		}
		fmt.Fprintf(w, "valid: %d %s\n", v.Tasks, noun)
	} else {
		for _, p := range v.Problems {
			fmt.Fprintln(w, p.String())
		}
	}
	if !v.Valid {
		if !jsonOut(cCtx) {
			fmt.Fprintf(cCtx.App.ErrWriter, "invalid: %d problem(s)\n", len(v.Problems))
		}
		return exitWith(exitError)
	}
	return nil
}

// specJSON reads a workflow file (YAML or JSON) as JSON for run.submit.
func specJSON(cCtx *cli.Context, path string) (json.RawMessage, error) {
	b, err := readFileArg(cCtx, path)
	if err != nil {
		return nil, err
	}
	js, err := toJSON(b)
	if _, ok := errors.AsType[*jsonSyntaxError](err); ok {
		return nil, failf("check it with `flowd validate "+path+"`", "%s: %v", path, err)
	}
	if err != nil {
		return nil, failf("check it with `flowd validate "+path+"`", "%s is neither JSON nor YAML: %v", path, err)
	}
	return js, nil
}
