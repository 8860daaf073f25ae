package tui

import (
	tea "github.com/charmbracelet/bubbletea"
)

// lineInput is a one-line editor for the filter and the command line. It
// draws its own block cursor (a reverse-video cursor vanishes under
// NO_COLOR) and never blinks, so frames stay deterministic.
type lineInput struct {
	prompt string
	value  []rune
	active bool
	// suggest, if set, completes the word on tab.
	suggest func(string) string
}

// inputResult says what a key did to the input.
type inputResult int

const (
	inputEdited inputResult = iota
	inputSubmit
	inputCancel
)

func (in *lineInput) start(prompt, value string) {
	in.prompt, in.value, in.active = prompt, []rune(value), true
}

func (in *lineInput) stop() { in.active = false }

func (in *lineInput) Value() string { return string(in.value) }

// update applies a key.
func (in *lineInput) update(msg tea.KeyMsg) inputResult {
	switch msg.Type {
	case tea.KeyEnter:
		return inputSubmit
	case tea.KeyEsc:
		return inputCancel
	case tea.KeyBackspace:
		if len(in.value) > 0 {
			in.value = in.value[:len(in.value)-1]
		} else {
			return inputCancel
		}
	case tea.KeyCtrlU:
		in.value = nil
	case tea.KeyCtrlW:
		v := in.value
		for len(v) > 0 && v[len(v)-1] == ' ' {
			v = v[:len(v)-1]
		}
		for len(v) > 0 && v[len(v)-1] != ' ' {
			v = v[:len(v)-1]
		}
		in.value = v
	case tea.KeyTab:
		if in.suggest != nil {
			in.value = []rune(in.suggest(string(in.value)))
		}
	case tea.KeySpace:
		in.value = append(in.value, ' ')
	case tea.KeyRunes:
		in.value = append(in.value, msg.Runes...)
	}
	return inputEdited
}

// ViewWidth is View in at most w cells: a long value shows its end (where
// the cursor is), after an ellipsis.
func (in *lineInput) ViewWidth(st *Styles, w int) string {
	v := in.value
	if room := w - len([]rune(in.prompt)) - 2; room > 0 && len(v) > room {
		v = append([]rune("…"), v[len(v)-room+1:]...)
	}
	cp := *in
	cp.value = v
	return cp.View(st)
}

// View renders the prompt, the value and a block cursor.
func (in *lineInput) View(st *Styles) string {
	cur := "█"
	if st.ASCII {
		cur = "_"
	}
	return st.Key.Render(in.prompt) + string(in.value) + cur
}
