package tui

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/uuid"
	"sigs.k8s.io/yaml"

	"github.com/flowd/flowd/rpc"
)

// Submitting and replaying with edited input, through the command line:
//
//	:submit PATH [INPUT]    a workflow file (YAML or JSON), with an optional JSON input
//	:replay ID [INPUT]      a new run from ID's frozen spec, with INPUT instead of its input
//
// `e` on the runs list and the run screen opens the input editor
// (editor.go) holding the run's input, pretty-printed; `:submit PATH`
// without an input opens it empty. ctrl+s there, or an inline INPUT, goes
// on to a confirm dialog; the new run's id is chosen when the dialog opens,
// so a repeated call cannot start two runs, and the new run is opened when
// the agent accepts it.

// promptMsg opens the command line holding text.
type promptMsg struct{ text string }

// editReplay opens the input editor to replay run r with an edited input.
func editReplay(c Common, r rpc.Run) tea.Msg {
	in := prettyJSON(r.Input)
	if in == "" {
		in = "{}"
	}
	return editorMsg{
		title: "Replay run " + shortID(r.ID) + " with new input",
		about: "workflow " + dash(r.Workflow) + " · state " + stateLabel(string(r.State)),
		text:  in,
		next:  func(input json.RawMessage) tea.Cmd { return replayWithInput(c, r.ID, input) },
	}
}

// fetchEditReplay fetches run id, then opens the input editor to replay it.
func fetchEditReplay(c Common, id string) tea.Cmd {
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		r, err := c.Client.RunGet(cx, id)
		if err != nil {
			return errMsg{fmt.Errorf("replay %s: %w", shortID(id), err)}
		}
		return editReplay(c, *r)
	}
}

// parseInput is the optional JSON input after a command's first argument.
func parseInput(name, s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf(":%s: the input is not valid JSON: %s", name, oneLine(s, 40))
	}
	return json.RawMessage(s), nil
}

// replayWithInput fetches the run (the id may be short) and asks to replay
// it with input.
func replayWithInput(c Common, id string, input json.RawMessage) tea.Cmd {
	return func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		r, err := c.Client.RunGet(cx, id)
		if err != nil {
			return errMsg{fmt.Errorf(":replay %s: %w", id, err)}
		}
		title := fmt.Sprintf("Replay run %s with new input?", shortID(r.ID))
		body := fmt.Sprintf("run %s\nworkflow %s · state %s\ninput %s\n\nA new run starts from this run's frozen spec, with this input.",
			r.ID, r.Workflow, stateLabel(string(r.State)), oneLine(string(input), 120))
		p := rpc.ReplayParams{ID: r.ID, NewID: uuid.Must(uuid.NewV7()).String(), Input: input}
		client := c.Client
		yes := func() tea.Msg {
			cx, cancel := ctx()
			defer cancel()
			res, err := client.RunReplay(cx, p)
			if err != nil {
				return errMsg{fmt.Errorf("replay %s: %w", shortID(p.ID), err)}
			}
			return openRunMsg{id: res.ID}
		}
		return confirmMsg{title: title, body: body, yes: yes, defaultYes: true}
	}
}

// submitFile reads a workflow file and asks to submit it with input; with
// edit set (no inline input) it opens the input editor first.
func submitFile(c Common, path string, input json.RawMessage, edit bool) tea.Cmd {
	return func() tea.Msg {
		b, err := os.ReadFile(path)
		if err != nil {
			return errMsg{fmt.Errorf(":submit: %w", err)}
		}
		wf, err := workflowJSON(b)
		if err != nil {
			return errMsg{fmt.Errorf(":submit %s: %w", path, err)}
		}
		var head struct {
			Name  string            `json:"name"`
			Tasks []json.RawMessage `json:"tasks"`
		}
		_ = json.Unmarshal(wf, &head)
		if edit {
			return editorMsg{
				title:      "Input for workflow " + dash(head.Name),
				about:      fmt.Sprintf("file %s · %d %s", path, len(head.Tasks), plural(len(head.Tasks), "task", "tasks")),
				allowEmpty: true,
				next: func(input json.RawMessage) tea.Cmd {
					return func() tea.Msg { return confirmSubmit(c, path, wf, input, head.Name, len(head.Tasks)) }
				},
			}
		}
		return confirmSubmit(c, path, wf, input, head.Name, len(head.Tasks))
	}
}

// confirmSubmit asks to submit workflow wf (read from path) with input.
func confirmSubmit(c Common, path string, wf, input json.RawMessage, name string, tasks int) tea.Msg {
	in := "none"
	if len(input) > 0 {
		in = oneLine(string(input), 120)
	}
	title := fmt.Sprintf("Submit workflow %s?", dash(name))
	body := fmt.Sprintf("file %s\n%d %s · input %s\n\nThe agent validates the workflow and starts a run.",
		path, tasks, plural(tasks, "task", "tasks"), in)
	p := rpc.SubmitParams{Workflow: wf, ID: uuid.Must(uuid.NewV7()).String(), Input: input, Nonce: rpc.NewRequestID()}
	client := c.Client
	yes := func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.RunSubmit(cx, p)
		if err != nil {
			return errMsg{fmt.Errorf("submit %s: %w", path, err)}
		}
		return openRunMsg{id: res.ID}
	}
	return confirmMsg{title: title, body: body, yes: yes, defaultYes: true}
}

// workflowJSON returns JSON as is and converts YAML (a superset) to JSON,
// as `flowd submit` does.
func workflowJSON(b []byte) (json.RawMessage, error) {
	t := strings.TrimSpace(string(b))
	if (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return json.RawMessage(t), nil
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(js), nil
}
