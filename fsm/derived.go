package fsm

import (
	"bytes"

	"github.com/flowd/flowd/fsm/domain"
)

// Derived indexes. The ready index (q/), leases (l/), wake-ups (w/), the
// admission queue (rp/), runs by state (rs/), finished runs by time (rf/)
// and runs by label (rl/, labelindex.go) are functions of the task and run
// records: a task is in the ready index iff its record says Indexed (at the
// key its queue, dispatch type, priority and ReadySeq give), leased iff
// LeaseExpiresAt is set, due for a wake-up iff RetryAt or DueAt is set (a
// run iff WakeAt is); a run waits for admission iff it is pending with an
// AdmitSeq, is listed under its State, under its FinishedAt iff that is
// set, and under each of its label pairs. The applier maintains them with
// the records (dispatch.go, state.go, apply_run.go), and IndexedStore keeps
// them in memory only: they are rebuilt from the records when a store is
// opened or restored, so a one-task job costs seven badger writes fewer
// (its run's three state keys and one finished key, its task's ready and
// lease keys, written and deleted). The price is memory: about 150 bytes
// per retained run and per live task, plus about 200 bytes per run and
// label for rl/, and a rebuild at start (a scan of every record; 1M
// retained tasks take a few seconds). TestModelRandomCommands checks after
// every command that the rebuild equals the live indexes.

// derivedPrefixes are kept in memory only and rebuilt from records.
var derivedPrefixes = [][]byte{pfxReady, pfxLease, pfxWake, pfxPending, pfxRunState, pfxFinished, pfxClaimReq, pfxLabel}

func isDerived(key []byte) bool {
	for _, p := range derivedPrefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// taskIndexKeys appends the derived keys of one task record.
func taskIndexKeys(out [][]byte, t *Task) [][]byte {
	if t.Indexed {
		out = append(out, readyKeyOf(t.Queue, dispatchType(t), t.Priority, t.ReadySeq, t))
	}
	if t.LeaseExpiresAt != 0 {
		out = append(out, leaseKeyOf(t.LeaseExpiresAt, t))
		if t.LeaseRequest != "" {
			out = append(out, claimReqKeyOf(t.LeaseOwner, t.LeaseRequest, t))
		}
	}
	if t.RetryAt != 0 {
		out = append(out, wakeKeyOf(t.RetryAt, t))
	}
	if t.DueAt != 0 {
		out = append(out, wakeKeyOf(t.DueAt, t))
	}
	return out
}

// deriveIndexes rebuilds every derived key from the records r holds, in no
// particular order; put receives each (its value is always empty).
func deriveIndexes(r Reader, put func(key []byte)) error {
	return deriveIndexesWith(r, put, nil, nil)
}

// deriveIndexesWith is deriveIndexes handing each run with labels to
// labelled instead of putting its label keys (when labelled is set): the
// label index is built apart, in the background (labelmirror.go). runID, when
// set, receives every run record's id (as its key names it).
func deriveIndexesWith(r Reader, put func(key []byte), labelled func(id string, l Labels), runID func(id string)) error {
	var bad error
	var keys [][]byte
	err := r.Scan(pfxTask, nil, false, func(_, v []byte) bool {
		var t Task
		if err := unmarshal(v, &t); err != nil {
			bad = err
			return false
		}
		keys = taskIndexKeys(keys[:0], &t)
		for _, k := range keys {
			put(k)
		}
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return err
	}
	err = r.Scan(pfxRun, nil, false, func(k, v []byte) bool {
		var run Run
		if err := unmarshal(v, &run); err != nil {
			bad = err
			return false
		}
		if runID != nil {
			runID(string(k[len(pfxRun):]))
		}
		if run.State == domain.RunPending && run.AdmitSeq != 0 {
			put(pendingKey(run.AdmitSeq, run.ID))
		}
		if run.State != "" {
			put(runStateKey(string(run.State), run.ID))
		}
		if run.FinishedAt != 0 {
			put(finishedKey(run.FinishedAt, run.ID))
		}
		if run.WakeAt != 0 {
			put(wakeKey(run.WakeAt, run.ID)) // a run id has no '/': not a task's
		}
		switch {
		case len(run.Labels) == 0:
		case labelled != nil:
			labelled(run.ID, run.Labels)
		default:
			keys = labelKeys(keys[:0], &run)
			for _, k := range keys {
				put(k)
			}
		}
		return true
	})
	if err == nil {
		err = bad
	}
	return err
}
