package tui

import (
	"context"
	"errors"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/fsm/domain"
)

// Messages shared by every component.

// errMsg carries a failed call to the footer. Components never render their
// own errors; they return errorCmd(err) and the root shows the latest one.
type errMsg struct{ err error }

func (e errMsg) Error() string { return e.err.Error() }

// toastMsg is a short success notice for the footer.
type toastMsg struct{ text string }

// resyncMsg asks every screen to fetch what it shows again (sent after a
// (re)connect, after events were lost, and on ctrl+r).
type resyncMsg struct{}

// clockMsg is the one-second tick that ages durations and the reconnect
// countdown. It carries no data: screens read Common.Now.
type clockMsg struct{}

// errorCmd returns a command that reports err.
func errorCmd(err error) tea.Cmd {
	return func() tea.Msg { return errMsg{err} }
}

// toastCmd returns a command that shows a notice.
func toastCmd(text string) tea.Cmd {
	return func() tea.Msg { return toastMsg{text} }
}

// isConnErr reports errors caused by an unreachable or leaderless cluster.
// While the connection is down the root hides them: the header already
// says so, and the footer should not flicker with one error per fetch.
func isConnErr(err error) bool {
	return errors.Is(err, domain.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// callTimeout bounds every call a command makes.
const callTimeout = 10 * time.Second

// outbox holds messages a component wants the root to act on at once
// (open a screen, ask for confirmation). A tea.Cmd would deliver them
// asynchronously, and a key typed right after enter would then reach the
// old screen; the root drains the outbox synchronously after each key.
type outbox struct{ msgs []tea.Msg }

func (o *outbox) post(m tea.Msg) {
	if m != nil {
		o.msgs = append(o.msgs, m)
	}
}

func (o *outbox) take() []tea.Msg {
	m := o.msgs
	o.msgs = nil
	return m
}

// Common is embedded (by value) in every component: its own size plus the
// shared, read-only environment (styles, keys, client, clock, flags).
// Components copy it at construction; only Width and Height differ.
type Common struct {
	Width, Height int
	Styles        *Styles
	Keys          *KeyMap
	Client        Client
	// Now is the clock; tests pin it so golden files are stable.
	Now func() time.Time
	// ReadOnly hides and disables every action.
	ReadOnly bool
}

// SetSize records the component's size.
func (c *Common) SetSize(w, h int) { c.Width, c.Height = max(w, 0), max(h, 0) }

// ctx returns a context bounding one call made by a command.
func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}
