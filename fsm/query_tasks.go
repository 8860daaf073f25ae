package fsm

import (
	"fmt"
	"strings"

	"github.com/flowd/flowd/fsm/domain"
)

// TaskFilter selects tasks for ListTasks; the zero value takes every task.
type TaskFilter struct {
	State    domain.TaskState
	Queue    string
	Type     string
	Workflow string // the run's workflow (spec name)
	// FinishedAfter and FinishedBefore bound when the task settled (ms,
	// exclusive; 0: no bound). A bound leaves out tasks not settled.
	FinishedAfter, FinishedBefore int64
}

func (q TaskFilter) match(t *Task) bool {
	switch {
	case q.State != "" && t.State != q.State,
		q.Queue != "" && t.Queue != q.Queue,
		q.Type != "" && t.Type != q.Type,
		q.FinishedAfter != 0 && t.FinishedAt <= q.FinishedAfter,
		q.FinishedBefore != 0 && (t.FinishedAt == 0 || t.FinishedAt >= q.FinishedBefore):
		return false
	}
	return true
}

// ListTasks lists tasks across runs, newest run first and by key within a
// run, from after cursor ("<run id>": after that run; "<run id>/<key>":
// after that task). The runs' task counts are the index: a run with no
// task in the asked state (say, failed: the dead-letter view) is skipped
// without reading its tasks. At most maxListScan runs are examined per
// page, so a page may hold fewer tasks than limit and still have a next
// cursor: keep paging.
func (f *FSM) ListTasks(q TaskFilter, limit int, cursor string) ([]*Task, string, error) {
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	curRun, curKey, _ := strings.Cut(cursor, "/")
	var out []*Task
	next := ""
	err := f.View(func(r Reader) error {
		var start []byte
		if curRun != "" {
			start = runKey(curRun)
		}
		examined, lastID := 0, ""
		var bad error
		err := r.Scan(pfxRun, start, true, func(k, v []byte) bool {
			id := string(k[len(pfxRun):])
			if id == curRun && curKey == "" {
				return true // the cursor's run is done
			}
			if examined == maxListScan {
				next = lastID // after the last run examined
				return false
			}
			examined++
			defer func() { lastID = id }()
			run := new(Run)
			if err := unmarshal(v, run); err != nil {
				bad = fmt.Errorf("decode run %s: %w", id, err)
				return false
			}
			if q.Workflow != "" && run.Workflow != q.Workflow || q.State != "" && run.Counts[q.State] == 0 {
				return true
			}
			pfx := taskPrefix(id)
			var from []byte
			if id == curRun {
				from = taskKey(id, curKey)
			}
			full := false
			err := r.Scan(pfx, from, false, func(k, v []byte) bool {
				if id == curRun && string(k[len(pfx):]) == curKey {
					return true
				}
				t := new(Task)
				if err := unmarshal(v, t); err != nil {
					bad = fmt.Errorf("decode task %s: %w", k, err)
					return false
				}
				if !q.match(t) {
					return true
				}
				if len(out) == limit {
					full = true
					return false
				}
				out = append(out, t)
				return true
			})
			if err != nil {
				bad = err
				return false
			}
			if full {
				next = out[len(out)-1].ID()
				return false
			}
			return bad == nil
		})
		if err != nil {
			return err
		}
		return bad
	})
	return out, next, err
}
