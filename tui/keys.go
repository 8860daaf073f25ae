package tui

import (
	"github.com/charmbracelet/bubbles/key"
)

// KeyMap is every binding of the TUI. Screens pick the ones they use for
// their help.KeyMap, so `?` lists exactly the keys of the current screen.
type KeyMap struct {
	Up, Down, Top, Bottom, PageUp, PageDown key.Binding
	Left, Right, NextPane, PrevPane         key.Binding
	Open, Back, Quit, ForceQuit             key.Binding
	Help, Filter, Command, Freeze, Refresh  key.Binding
	Sort, Reverse, Fold, ExpandAll          key.Binding
	CollapseAll                             key.Binding
	Screens                                 [numScreens]key.Binding

	// Actions (disabled under --readonly).
	Cancel, Interrupt, Resume, Revert, Replay, Pause key.Binding
	// Schedule actions (the schedules screen).
	SchedPause, Trigger, Delete key.Binding
	// Marking runs for bulk actions (the runs screen).
	Mark, MarkAll key.Binding
	// Approve a waiting task (the task screen); replay with edited input.
	Approve, EditReplay key.Binding
	// Retry in place from the failed-tasks screen: the selected task's
	// run, or every failed run of its workflow.
	RetryTask, RetryFailed key.Binding
}

// NewKeyMap returns the default bindings; readOnly disables the actions.
func NewKeyMap(readOnly bool) *KeyMap {
	b := func(keys []string, help, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	k := &KeyMap{
		Up:          b([]string{"k", "up"}, "k/↑", "up"),
		Down:        b([]string{"j", "down"}, "j/↓", "down"),
		Top:         b([]string{"g", "home"}, "g", "top"),
		Bottom:      b([]string{"G", "end"}, "G", "bottom"),
		PageUp:      b([]string{"pgup", "ctrl+b", "ctrl+u"}, "pgup", "page up"),
		PageDown:    b([]string{"pgdown", "ctrl+f", "ctrl+d"}, "pgdn", "page down"),
		Left:        b([]string{"h", "left"}, "h/←", "prev tab"),
		Right:       b([]string{"l", "right"}, "l/→", "next tab"),
		NextPane:    b([]string{"tab"}, "tab", "next pane"),
		PrevPane:    b([]string{"shift+tab"}, "S-tab", "prev pane"),
		Open:        b([]string{"enter"}, "enter", "open"),
		Back:        b([]string{"esc"}, "esc", "back"),
		Quit:        b([]string{"q"}, "q", "back/quit"),
		ForceQuit:   b([]string{"ctrl+c"}, "ctrl+c", "quit"),
		Help:        b([]string{"?"}, "?", "help"),
		Filter:      b([]string{"/"}, "/", "filter"),
		Command:     b([]string{":"}, ":", "command"),
		Freeze:      b([]string{"f"}, "f", "freeze/live"),
		Refresh:     b([]string{"ctrl+r"}, "ctrl+r", "refetch"),
		Sort:        b([]string{"s"}, "s", "sort"),
		Reverse:     b([]string{"S"}, "S", "reverse sort"),
		Fold:        b([]string{" ", "enter"}, "space", "fold/unfold"),
		ExpandAll:   b([]string{"E"}, "E", "expand all"),
		CollapseAll: b([]string{"C"}, "C", "collapse all"),
		Cancel:      b([]string{"c"}, "c", "cancel run"),
		Interrupt:   b([]string{"i"}, "i", "interrupt run"),
		Resume:      b([]string{"r"}, "r", "resume run"),
		Revert:      b([]string{"v"}, "v", "revert run"),
		Replay:      b([]string{"R"}, "R", "replay run"),
		Pause:       b([]string{"p"}, "p", "pause/resume queue"),
		SchedPause:  b([]string{"p"}, "p", "pause/resume"),
		Trigger:     b([]string{"t"}, "t", "trigger now"),
		Delete:      b([]string{"d"}, "d", "delete"),
		Mark:        b([]string{" "}, "space", "select run"),
		MarkAll:     b([]string{"a"}, "a", "select all/none"),
		Approve:     b([]string{"a"}, "a", "approve waiting task"),
		EditReplay:  b([]string{"e"}, "e", "replay with edited input"),
		RetryTask:   b([]string{"r"}, "r", "retry in place"),
		RetryFailed: b([]string{"A"}, "A", "retry the workflow's failed runs"),
	}
	names := []string{"runs", "run", "task", "queues", "workers", "cluster", "events", "schedules", "failed tasks"}
	for i, n := range names {
		d := string(rune('1' + i))
		k.Screens[i] = b([]string{d}, d, n)
	}
	if readOnly {
		for _, a := range []*key.Binding{&k.Cancel, &k.Interrupt, &k.Resume, &k.Revert, &k.Replay, &k.Pause, &k.SchedPause, &k.Trigger, &k.Delete, &k.Mark, &k.MarkAll, &k.Approve, &k.EditReplay, &k.RetryTask, &k.RetryFailed} {
			a.SetEnabled(false)
		}
	}
	return k
}

// nav is the movement group every list shares.
func (k *KeyMap) nav() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.Top, k.Bottom, k.PageUp, k.PageDown}
}

// global is the group of keys that work on every screen.
func (k *KeyMap) global() []key.Binding {
	return []key.Binding{k.Help, k.Command, k.Freeze, k.Refresh, k.Back, k.Quit, k.ForceQuit, k.screensHelp()}
}

// runActions are the run verbs (disabled under --readonly).
func (k *KeyMap) runActions() []key.Binding {
	return []key.Binding{k.Cancel, k.Interrupt, k.Resume, k.Revert, k.Replay, k.EditReplay}
}

// screensHelp is one help line for the screen keys.
func (k *KeyMap) screensHelp() key.Binding {
	return key.NewBinding(key.WithKeys("1", "2", "3", "4", "5", "6", "7", "8", "9"), key.WithHelp("1-9", "screens"))
}
