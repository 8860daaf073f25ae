package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/rpc"
	"github.com/flowd/flowd/worker"
)

func init() { commands = append(commands, workerCommand) }

// PermanentExitCode: an exec handler exiting with it fails the task without
// further attempts; any other non-zero exit is a retryable failure.
const PermanentExitCode = 100

var workerCommand = &cli.Command{
	Name:  "worker",
	Usage: "run a worker",
	Subcommands: []*cli.Command{{
		Name:      "run",
		Usage:     "run a generic worker that executes a command for every claimed task (any language)",
		ArgsUsage: " ",
		Description: `Each claimed task runs CMD (through /bin/sh -c) with the task as JSON on stdin:

  {"task_id","run_id","key","type","queue","input","run_input","dep_results",
   "attempt","idempotency_key","compensation","result"}

Standard output is the task's result: JSON as it is, other text (trimmed)
as a JSON string, empty means null. A non-zero exit
fails the attempt with the tail of standard error as the error; exit code 100
fails it permanently (no retry). A lost lease or --task-timeout kills the command.
The environment carries FLOWD_TASK_ID, FLOWD_RUN_ID, FLOWD_TASK_KEY,
FLOWD_ATTEMPT and FLOWD_IDEMPOTENCY_KEY.

Every line of standard output and standard error is also the attempt's log
(` + "`flowd task logs RUN KEY`" + `), up to 64 KiB per attempt.

SIGTERM/SIGINT drains (finish in-flight tasks, then exit 0); a second signal
exits at once.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "exec", Usage: "command to run for each task", Required: true, EnvVars: []string{"FLOWD_WORKER_EXEC"}},
			&cli.StringSliceFlag{Name: "type", Usage: "task type to handle (repeatable)", Required: true, EnvVars: []string{"FLOWD_WORKER_TYPES"}},
			&cli.StringSliceFlag{Name: "queue", Usage: "queue to claim from (repeatable; default every queue)", EnvVars: []string{"FLOWD_WORKER_QUEUES"}},
			&cli.IntFlag{Name: "concurrency", Usage: "task slots", Value: 4, EnvVars: []string{"FLOWD_WORKER_CONCURRENCY"}},
			&cli.DurationFlag{Name: "task-timeout", Aliases: []string{"timeout"}, Usage: "kill a command running longer than `DUR` (0 = no limit); --timeout here is an alias of this, not the per-call deadline", EnvVars: []string{"FLOWD_WORKER_TASK_TIMEOUT", "FLOWD_WORKER_TIMEOUT"}},
			&cli.StringFlag{Name: "id", Usage: "worker id (default hostname-pid)", EnvVars: []string{"FLOWD_WORKER_ID"}},
			&cli.DurationFlag{Name: "drain-timeout", Usage: "how long a graceful stop waits for in-flight tasks", Value: 30 * time.Second, EnvVars: []string{"FLOWD_WORKER_DRAIN_TIMEOUT"}},
		},
		Action: runExecWorker,
	}},
}

func runExecWorker(c *cli.Context) error {
	logger := slog.New(slog.NewTextHandler(c.App.ErrWriter, nil))
	token, tlsCfg, err := clientAuth(c)
	if err != nil {
		return err
	}
	w, err := worker.New(endpoints(c), worker.Options{
		ID: c.String("id"), Queues: c.StringSlice("queue"), Concurrency: c.Int("concurrency"),
		DrainTimeout: c.Duration("drain-timeout"), Route: route(c), Logger: logger,
		Token: token, TLS: tlsCfg,
	})
	if err != nil {
		return err
	}
	h := execHandler(c.String("exec"), c.Duration("task-timeout"))
	for _, t := range c.StringSlice("type") {
		w.Register(t, h)
	}
	return w.RunWithSignals(context.Background())
}

// execInput is what an exec handler reads on stdin.
type execInput struct {
	TaskID         string                     `json:"task_id"`
	RunID          string                     `json:"run_id"`
	Key            string                     `json:"key"`
	Type           string                     `json:"type"`
	Queue          string                     `json:"queue"`
	Input          json.RawMessage            `json:"input,omitempty"`
	RunInput       json.RawMessage            `json:"run_input,omitempty"`
	DepResults     map[string]json.RawMessage `json:"dep_results"`
	Attempt        int                        `json:"attempt"`
	IdempotencyKey string                     `json:"idempotency_key"`
	Compensation   bool                       `json:"compensation,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
}

func execHandler(command string, timeout time.Duration) worker.Handler {
	return func(ctx context.Context, t *worker.Task) (any, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		in, _ := json.Marshal(execInput{TaskID: t.ID, RunID: t.RunID, Key: t.Key, Type: t.Type, Queue: t.Queue,
			Input: t.Input, RunInput: t.RunInput, DepResults: t.DepResults, Attempt: t.Attempt,
			IdempotencyKey: t.IdempotencyKey(), Compensation: t.Compensation, Result: t.Result})
		cmd := exec.Command("/bin/sh", "-c", command)
		cmd.Stdin = bytes.NewReader(in)
		var stdout, stderr bytes.Buffer
		// Both streams are also the attempt's log, line by line (`flowd task
		// logs`), on success too.
		cmd.Stdout = io.MultiWriter(&stdout, t.LogWriter(rpc.StreamStdout))
		cmd.Stderr = io.MultiWriter(&tailWriter{max: 4096, buf: &stderr}, t.LogWriter(rpc.StreamStderr))
		cmd.Env = append(os.Environ(), "FLOWD_TASK_ID="+t.ID, "FLOWD_RUN_ID="+t.RunID, "FLOWD_TASK_KEY="+t.Key,
			fmt.Sprintf("FLOWD_ATTEMPT=%d", t.Attempt), "FLOWD_IDEMPOTENCY_KEY="+t.IdempotencyKey())
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, worker.Permanent(fmt.Errorf("start %q: %w", command, err))
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			// Lease lost, timeout or hard stop: stop the whole process group.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("command timed out after %s", timeout)
			}
			return nil, context.Cause(ctx)
		}
		if err != nil {
			msg := strings.TrimSpace(stderr.String())
			if msg == "" {
				msg = err.Error()
			} else {
				msg = err.Error() + ": " + msg
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == PermanentExitCode {
				return nil, worker.Permanent(errors.New(msg))
			}
			return nil, errors.New(msg)
		}
		out := bytes.TrimSpace(stdout.Bytes())
		if len(out) == 0 {
			return nil, nil
		}
		if !json.Valid(out) {
			// Plain text (echo hello) is the result as a JSON string.
			return string(out), nil
		}
		return json.RawMessage(out), nil
	}
}

// tailWriter keeps the last max bytes written.
type tailWriter struct {
	max int
	buf *bytes.Buffer
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if over := w.buf.Len() - w.max; over > 0 {
		b := append([]byte(nil), w.buf.Bytes()[over:]...)
		w.buf.Reset()
		w.buf.Write(b)
	}
	return len(p), nil
}
