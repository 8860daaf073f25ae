package tui

import (
	"encoding/json"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/uuid"

	"github.com/flowd/flowd/rpc"
)

// Approving a waiting task from the task screen: `a` on a task of type
// wait that is waiting opens a one-line payload editor (JSON, empty for
// none); enter opens a confirm dialog, and "yes" calls task.signal, which
// completes the wait with the payload as its result. The signal id is
// chosen when the dialog opens (a retried call is the same signal), and the
// wait's fencing token is sent when task.get showed one, so a signal meant
// for this wait cannot complete a later one.

// approvable reports whether t can be approved now.
func approvable(t *rpc.Task) bool {
	return t != nil && t.Type == "wait" && t.Waiting
}

// startApprove opens the payload editor (or says why not).
func (m *taskDetail) startApprove() tea.Cmd {
	if m.ReadOnly {
		return nil
	}
	if !approvable(m.task) {
		return errorCmd(fmt.Errorf("task %s is not a waiting wait task: nothing to approve", m.key))
	}
	m.payload.start("approve "+m.key+" with payload (JSON, empty for none): ", "")
	return nil
}

// payloadKey edits the payload; enter asks to confirm.
func (m *taskDetail) payloadKey(msg tea.KeyMsg) tea.Cmd {
	switch m.payload.update(msg) {
	case inputCancel:
		m.payload.stop()
	case inputSubmit:
		raw := json.RawMessage(m.payload.Value())
		if len(raw) > 0 && !json.Valid(raw) {
			return errorCmd(fmt.Errorf("the payload is not valid JSON: fix it, or empty it for none"))
		}
		m.payload.stop()
		m.post(confirmApprove(m.Common, *m.task, raw))
	}
	return nil
}

// confirmApprove asks to approve task t with payload.
func confirmApprove(c Common, t rpc.Task, payload json.RawMessage) tea.Msg {
	shown := "none"
	if len(payload) > 0 {
		shown = oneLine(string(payload), 200)
	}
	title := fmt.Sprintf("Approve task %s?", t.Key)
	body := fmt.Sprintf("run %s\ntask %s (wait", t.RunID, t.Key)
	if t.Signal != "" {
		body += ", signal " + t.Signal
	}
	body += ")\npayload " + shown + "\n\nThe wait completes with the payload as its result; its dependents start."
	p := rpc.TaskSignalParams{RunID: t.RunID, Key: t.Key, Payload: payload, SignalID: uuid.Must(uuid.NewV7()).String(),
		FencingToken: t.FencingToken}
	client := c.Client
	yes := func() tea.Msg {
		cx, cancel := ctx()
		defer cancel()
		res, err := client.TaskSignal(cx, p)
		if err != nil {
			return errMsg{fmt.Errorf("approve %s: %w", p.Key, err)}
		}
		if !res.Accepted {
			return toastMsg{fmt.Sprintf("task %s was no longer waiting: nothing changed", p.Key)}
		}
		return toastMsg{fmt.Sprintf("task %s approved (index %d)", p.Key, res.Index)}
	}
	return confirmMsg{title: title, body: body, yes: yes}
}
