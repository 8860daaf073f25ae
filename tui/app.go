package tui

import (
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/flowd/flowd/fsm/domain"
)

// Messages of the root: navigation.

// openRunMsg opens the run detail of a run (full or short id).
type openRunMsg struct{ id string }

// openTaskMsg opens the task detail of runID/key.
type openTaskMsg struct{ runID, key string }

// screenID names the nine screens (keys 1-9).
type screenID int

const (
	scrRuns screenID = iota
	scrRun
	scrTask
	scrQueues
	scrWorkers
	scrCluster
	scrEvents
	scrSchedules
	scrDead // the failed tasks (dead letters)
	numScreens
)

// screen is what the root needs from every screen besides Update (which
// each screen declares with its concrete type; see update).
type screen interface {
	help.KeyMap
	View() string
	SetSize(w, h int)
	Title() string
	Focus() tea.Cmd  // became visible: load or catch up
	Blur()           // hidden: stop fetching, keep marking dirty
	Back() bool      // consumed esc (e.g. cleared a filter)
	Capturing() bool // a text input has the keys
	take() []tea.Msg // the outbox: acted on right after each key
}

// Config builds an App.
type Config struct {
	Client    Client
	Prober    Prober
	Endpoints []string
	ReadOnly  bool
	ASCII     bool
	// Now is the clock (default time.Now); tests pin it.
	Now func() time.Time
}

// App is the root model. It only routes: keys to the overlay or the
// active screen, data messages to every screen (each ignores what is not
// its own), navigation between screens with a back stack, and the
// header/footer chrome.
type App struct {
	c       Common
	header  *header
	footer  *footer
	runs    *runsModel
	run     *runDetail
	task    *taskDetail
	queues  *queuesModel
	workers *workersModel
	cluster *clusterModel
	events  *eventsModel
	sched   *schedulesModel
	dead    *deadModel

	stack    []screenID
	dialog   *dialog
	editor   *editor // the input editor (editor.go)
	helpOpen bool
	cmdline  lineInput
	frozen   bool
	held     eventsMsg // events that arrived while frozen
	lost     connMsg   // the last connDown until the next connLive
}

// New returns the root model.
func New(cfg Config) *App {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := Common{Styles: NewStyles(cfg.ASCII), Keys: NewKeyMap(cfg.ReadOnly), Client: cfg.Client, Now: cfg.Now, ReadOnly: cfg.ReadOnly}
	a := &App{c: c, header: newHeader(c, cfg.Prober, cfg.Endpoints), footer: newFooter(c),
		runs: newRuns(c), run: newRunDetail(c), task: newTaskDetail(c), queues: newQueues(c),
		workers: newWorkers(c), cluster: newCluster(c), events: newEvents(c), sched: newSchedules(c), dead: newDead(c), stack: []screenID{scrRuns}}
	a.cmdline.suggest = completeCommand
	return a
}

func (a *App) screens() []screen {
	return []screen{a.runs, a.run, a.task, a.queues, a.workers, a.cluster, a.events, a.sched, a.dead}
}

func (a *App) active() screenID { return a.stack[len(a.stack)-1] }

func (a *App) cur() screen { return a.screens()[a.active()] }

// Init starts the probes, the clock and the first screen.
func (a *App) Init() tea.Cmd {
	return tea.Batch(a.header.Init(), tick(), a.runs.Focus())
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return clockMsg{} })
}

// update routes msg to one screen through its concrete Update.
func (a *App) update(id screenID, msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	switch id {
	case scrRuns:
		a.runs, cmd = a.runs.Update(msg)
	case scrRun:
		a.run, cmd = a.run.Update(msg)
	case scrTask:
		a.task, cmd = a.task.Update(msg)
	case scrQueues:
		a.queues, cmd = a.queues.Update(msg)
	case scrWorkers:
		a.workers, cmd = a.workers.Update(msg)
	case scrCluster:
		a.cluster, cmd = a.cluster.Update(msg)
	case scrEvents:
		a.events, cmd = a.events.Update(msg)
	case scrSchedules:
		a.sched, cmd = a.sched.Update(msg)
	case scrDead:
		a.dead, cmd = a.dead.Update(msg)
	}
	return cmd
}

// broadcast sends a data message to every screen.
func (a *App) broadcast(msg tea.Msg) tea.Cmd {
	cmds := make([]tea.Cmd, 0, numScreens)
	for id := range numScreens {
		cmds = append(cmds, a.update(id, msg))
	}
	return tea.Batch(cmds...)
}

// Update routes one message.
func (a *App) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		a.setSize(msg.Width, msg.Height)
		return a, nil
	case tea.KeyMsg:
		return a, a.key(msg)
	case clockMsg:
		return a, tick()
	case probeTickMsg:
		var cmd tea.Cmd
		a.header, cmd = a.header.Update(msg)
		return a, cmd
	case probeMsg:
		var cmd tea.Cmd
		a.header, cmd = a.header.Update(msg)
		return a, tea.Batch(cmd, a.update(scrCluster, msg))
	case connMsg:
		was := a.header.live()
		a.header, _ = a.header.Update(msg)
		switch msg.State {
		case connDown:
			if a.lost.Since.IsZero() || a.lost.Node == "" {
				a.lost = msg
			}
			a.lost.RetryAt = msg.RetryAt
		case connLive:
			a.lost = connMsg{}
		}
		cmds := []tea.Cmd{a.update(scrCluster, msg)}
		if msg.State == connLive && !was {
			cmds = append(cmds, a.broadcast(resyncMsg{}), a.header.probe())
		}
		return a, tea.Batch(cmds...)
	case eventsMsg:
		if a.frozen {
			a.held.Events = append(a.held.Events, msg.Events...)
			a.held.Resync = a.held.Resync || msg.Resync || len(a.held.Events) > maxBuffered
			if len(a.held.Events) > maxBuffered {
				a.held.Events = nil
			}
			return a, nil
		}
		return a, a.broadcast(msg)
	case freezeMsg:
		return a, a.freeze(msg.on)
	case errMsg:
		if !isConnErr(msg.err) || a.header.live() {
			a.footer.setErr(msg.err)
		}
		return a, nil
	case toastMsg:
		a.footer.setToast(msg.text)
		return a, nil
	case confirmMsg:
		a.dialog = newDialog(a.c, msg)
		a.dialog.SetSize(a.c.Width, a.c.Height)
		return a, nil
	case showHelpMsg:
		a.helpOpen = true
		return a, nil
	case editorMsg:
		a.editor = newEditor(a.c, msg)
		return a, nil
	case promptMsg:
		a.cmdline.start(":", msg.text)
		return a, nil
	case openRunMsg:
		return a, tea.Batch(a.run.open(msg.id), a.push(scrRun))
	case openTaskMsg:
		return a, tea.Batch(a.task.open(msg.runID, msg.key), a.push(scrTask))
	case openScreenMsg:
		return a, a.openScreen(msg)
	}
	return a, a.broadcast(msg)
}

func (a *App) setSize(w, h int) {
	a.c.SetSize(w, h)
	a.header.SetSize(w, 3)
	a.footer.SetSize(w, 1)
	for _, s := range a.screens() {
		s.SetSize(w, a.bodyHeight())
	}
	if a.dialog != nil {
		a.dialog.SetSize(w, h)
	}
	if a.editor != nil {
		a.editor.SetSize(w, h)
	}
}

func (a *App) bodyHeight() int { return max(a.c.Height-4, 1) }

// push shows a screen on top of the current one (no duplicates in a row).
func (a *App) push(id screenID) tea.Cmd {
	if a.active() == id {
		return a.cur().Focus()
	}
	a.cur().Blur()
	a.stack = append(a.stack, id)
	return a.cur().Focus()
}

// pop goes back; it reports false at the bottom of the stack.
func (a *App) pop() (tea.Cmd, bool) {
	if len(a.stack) == 1 {
		return nil, false
	}
	a.cur().Blur()
	a.stack = a.stack[:len(a.stack)-1]
	return a.cur().Focus(), true
}

// jump shows a top-level screen: the stack becomes runs (+ the screen), so
// q from any screen returns to runs before quitting.
func (a *App) jump(id screenID) tea.Cmd {
	switch {
	case id == scrRun && a.run.id == "":
		if r, ok := a.runs.selected(); ok {
			_, cmd := a.Update(openRunMsg{id: r.ID})
			return cmd
		}
	case id == scrTask && a.task.runID == "" && a.run.selKey != "" && a.run.run != nil:
		_, cmd := a.Update(openTaskMsg{runID: a.run.run.ID, key: a.run.selKey})
		return cmd
	}
	a.cur().Blur()
	a.stack = []screenID{scrRuns}
	if id != scrRuns {
		a.stack = append(a.stack, id)
	}
	return a.cur().Focus()
}

func (a *App) openScreen(m openScreenMsg) tea.Cmd {
	cmd := a.jump(m.screen)
	switch m.screen {
	case scrRuns:
		tab := 0
		for i, s := range domain.RunStates {
			if string(s) == m.arg {
				tab = i + 1
			}
		}
		if tab != a.runs.tab || m.arg != "" {
			cmd = tea.Batch(cmd, a.runs.setTab(tab))
		}
	case scrEvents:
		if m.arg != "" {
			a.events.log.setQuery(m.arg)
		}
	}
	return cmd
}

func (a *App) freeze(on bool) tea.Cmd {
	a.frozen = on
	a.header.frozen = on
	if on {
		return toastCmd("frozen: the screen keeps still; f (or :live) resumes")
	}
	held := a.held
	a.held = eventsMsg{}
	if len(held.Events) == 0 && !held.Resync {
		return nil
	}
	return a.broadcast(held)
}

// key routes a key: dialog, help, command line, a typing screen, global
// keys, then the active screen.
func (a *App) key(msg tea.KeyMsg) tea.Cmd {
	k := a.c.Keys
	if key.Matches(msg, k.ForceQuit) {
		return tea.Quit
	}
	// Keys typed faster than the terminal is read arrive as one message
	// ("jj"); outside a text input each rune is its own key.
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste && !a.cmdline.active && a.editor == nil && !a.cur().Capturing() {
		cmds := make([]tea.Cmd, 0, len(msg.Runes))
		for _, r := range msg.Runes {
			cmds = append(cmds, a.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
		}
		return tea.Batch(cmds...)
	}
	if a.dialog != nil {
		a.dialog, _ = a.dialog.Update(msg)
		if a.dialog.closed {
			cmd := a.dialog.chosen
			a.dialog = nil
			return cmd
		}
		return nil
	}
	if a.editor != nil {
		var cmd tea.Cmd
		a.editor, cmd = a.editor.Update(msg)
		if a.editor.closed {
			cmd = a.editor.chosen
			a.editor = nil
		}
		return cmd
	}
	if a.helpOpen {
		if key.Matches(msg, k.Help, k.Back, k.Quit) {
			a.helpOpen = false
		}
		return nil
	}
	if a.cmdline.active {
		switch a.cmdline.update(msg) {
		case inputSubmit:
			a.cmdline.stop()
			return runCommand(a.c, a.cmdline.Value())
		case inputCancel:
			a.cmdline.stop()
		}
		return nil
	}
	if a.cur().Capturing() {
		return a.toScreen(msg)
	}
	switch {
	case key.Matches(msg, k.Help):
		a.helpOpen = true
		return nil
	case key.Matches(msg, k.Command):
		a.cmdline.start(":", "")
		return nil
	case key.Matches(msg, k.Freeze):
		return a.freeze(!a.frozen)
	case key.Matches(msg, k.Refresh):
		return tea.Batch(a.broadcast(resyncMsg{}), a.header.probe())
	case key.Matches(msg, k.Back):
		if a.cur().Back() {
			return a.actOnOutbox(nil) // clearing a filter may reload
		}
		cmd, _ := a.pop()
		return cmd
	case key.Matches(msg, k.Quit):
		if cmd, ok := a.pop(); ok {
			return cmd
		}
		return tea.Quit
	}
	for i, b := range k.Screens {
		if key.Matches(msg, b) {
			return a.jump(screenID(i))
		}
	}
	return a.toScreen(msg)
}

// toScreen gives a key to the active screen, then acts on its outbox.
func (a *App) toScreen(msg tea.KeyMsg) tea.Cmd {
	return a.actOnOutbox(a.update(a.active(), msg))
}

// actOnOutbox acts on the active screen's outbox after cmd.
func (a *App) actOnOutbox(cmd tea.Cmd) tea.Cmd {
	cmds := []tea.Cmd{cmd}
	for _, m := range a.cur().take() {
		_, cmd := a.Update(m)
		cmds = append(cmds, cmd)
	}
	return tea.Batch(cmds...)
}

// View renders header, body (with overlays) and footer.
func (a *App) View() string {
	if a.c.Width == 0 || a.c.Height == 0 {
		return ""
	}
	st := a.c.Styles
	w, bh := a.c.Width, a.bodyHeight()
	body := fill(a.cur().View(), w, bh)
	warning := ""
	if !a.lost.Since.IsZero() {
		body = st.dimLines(body)
		if c := a.lost; c.Node == "" {
			warning = "⚠ cannot connect to " + c.Endpoint
			if c.Err != nil {
				warning += ": " + oneLine(c.Err.Error(), 80)
			}
		} else {
			warning = "⚠ connection to " + c.Node + " lost " + ago(a.c.Now(), c.Since) + ": showing the last data (stale)"
		}
	}
	var keys help.KeyMap = a.cur()
	switch {
	case a.dialog != nil:
		body = overlay(body, a.dialog.View(), w, bh)
		keys = a.dialog
	case a.editor != nil:
		body = overlay(body, a.editor.View(), w, bh)
		keys = a.editor
	case a.helpOpen:
		body = overlay(body, helpView(a.c, a.cur().Title(), a.cur()), w, bh)
		keys = keysOf{{relabel(a.c.Keys.Help, "close")}}
	}
	foot := a.footer.View(keys, warning)
	if a.cmdline.active {
		foot = a.cmdline.ViewWidth(st, w) + st.Subtle.Render("   (tab completes, enter runs, esc cancels)")
	}
	return a.header.View(a.active()) + "\n" + body + "\n" + fit(foot, w)
}

// relabel changes a binding's help text (for the footer).
func relabel(b key.Binding, desc string) key.Binding {
	b.SetHelp(b.Help().Key, desc)
	return b
}
