package tui

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Options configure Run.
type Options struct {
	// Endpoints are the agents (--addr); the TUI follows one at a time and
	// fails over to the next.
	Endpoints []string
	// Route is where actions go: "" or "leader" to the leader's endpoint
	// when it is one of Endpoints, "any" to the endpoint on screen (its
	// agent forwards them). See Live.
	Route string
	// ReadOnly hides every action.
	ReadOnly bool
	// ASCII draws with ASCII line art and no colour (the `›` cursor and the
	// state glyphs stay). NoColor drops colour only; NO_COLOR in the
	// environment sets it too.
	ASCII, NoColor bool
	// Input and Output default to the terminal (stdin, stdout).
	Input  io.Reader
	Output io.Writer
	// Logger receives debug logs of the connection (default: discarded;
	// the terminal belongs to the TUI).
	Logger *slog.Logger
	// Auth authenticates on tcp:// and tls:// endpoints (--token, --ca-cert).
	Auth Auth
}

// Run runs the TUI until the user quits or ctx ends. It returns an error
// only for a setup problem: connection errors are shown, never fatal.
func Run(ctx context.Context, opts Options) error {
	if len(opts.Endpoints) == 0 {
		return errors.New("no endpoints: give --addr (or FLOWD_ADDR)")
	}
	live, err := NewLive(opts.Endpoints, opts.Logger, opts.Auth)
	if err != nil {
		return err
	}
	defer live.Close()
	live.Route = opts.Route
	if opts.ASCII || opts.NoColor || os.Getenv("NO_COLOR") != "" {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	app := New(Config{Client: live, Prober: live, Endpoints: opts.Endpoints, ReadOnly: opts.ReadOnly, ASCII: opts.ASCII})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	popts := []tea.ProgramOption{tea.WithAltScreen(), tea.WithContext(ctx)}
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	if opts.Output != nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	}
	p := tea.NewProgram(app, popts...)
	go live.Run(ctx, p.Send)
	_, err = p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // ctx ended: a normal exit
	}
	return err
}
