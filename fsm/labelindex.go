package fsm

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
)

// The label index: rl/<pair><run> for every label pair of every run, so a
// run.list selector with an equality term walks only the runs carrying
// that pair, not every run newest first.
//
// It is derived like rs/ and rf/ (derived.go): a run's labels are fixed
// when it is created, so the applier writes the run's keys in createRun
// and deletes them in deleteRun, through the same write buffer as the
// record; IndexedStore keeps them in memory only and rebuilds them from
// the run records at open and after a restore, publishing them when built
// (labelmirror.go: until then lists scan). Unlike the other derived
// indexes it is query-only: it is not state any command reads, so full
// scans leave it out (the digest, snapshots), and the digest and the
// snapshot format are those of a binary without it. rs/ and rf/ are hashed
// because they were stored state before they were derived; rl/ never was,
// and hashing it would make a node running this binary report a node
// running the previous one (a rolling upgrade) as diverged. A store that
// does not rebuild derived keys itself (MemStore) gets them from the run
// records when a snapshot is restored into it (FSM.Restore).
//
// A list with labels (listByLabels) intersects the pair prefixes, and the
// state's rs/ prefix when a state is asked for, all ordered by run id
// (newest first, like the scan), by leapfrogging: each prefix in turn
// seeks to the largest id at or below the current candidate; when every
// prefix holds the candidate, its record is read and the rest of the
// filter checked on it, as the scan does. The result is exactly the scan's
// whenever the scan's MaxListScan bound does not cut its page short; where
// it would, the index answers the full page (the bound then counts index
// positions visited, and the cursor resumes below the last id decided).

// labelKeys appends the index keys of a run's labels, sorted (Apply never
// writes in map order).
func labelKeys(out [][]byte, r *Run) [][]byte {
	if len(r.Labels) == 0 {
		return out
	}
	ks := make([]string, 0, len(r.Labels))
	for k := range r.Labels {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		out = append(out, labelKey(k, r.Labels[k], r.ID))
	}
	return out
}

// indexLabels writes a new run's label keys.
func (a *applier) indexLabels(r *Run) {
	for _, k := range labelKeys(nil, r) {
		must(a.tx.Set(k, []byte{}))
	}
}

// unindexLabels deletes a run's label keys (the run is being deleted).
func (a *applier) unindexLabels(r *Run) {
	for _, k := range labelKeys(nil, r) {
		a.del(k)
	}
}

// isQueryOnly: derived keys no command reads, left out of full scans.
func isQueryOnly(key []byte) bool { return bytes.HasPrefix(key, pfxLabel) }

// rebuilder is a store that derives the derived indexes itself when it is
// opened or replaced (IndexedStore); a snapshot restored into any other
// store gets its query-only keys from the records (FSM.Restore).
type rebuilder interface{ rebuildsDerived() }

func (s *IndexedStore) rebuildsDerived() {}

// restoreDerivedPut wraps a restore's put for a store that keeps every key
// it is given: each run record brings its label keys along.
func restoreDerivedPut(put func(k, v []byte) error) func(k, v []byte) error {
	var keys [][]byte
	return func(k, v []byte) error {
		if isQueryOnly(k) {
			return nil // a snapshot written with them: rebuilt from the records
		}
		if err := put(k, v); err != nil {
			return err
		}
		if !bytes.HasPrefix(k, pfxRun) {
			return nil
		}
		var run Run
		if err := unmarshal(v, &run); err != nil {
			return fmt.Errorf("decode run %s: %w", k[len(pfxRun):], err)
		}
		keys = labelKeys(keys[:0], &run)
		for _, lk := range keys {
			if err := put(lk, []byte{}); err != nil {
				return err
			}
		}
		return nil
	}
}

// listByLabels is ListRunsWhere for a filter with labels (see above); it
// appends to out and returns the next cursor.
func listByLabels(r Reader, state domain.RunState, q RunFilter, limit int, cursor string, out []*Run) ([]*Run, string, error) {
	terms := make([][]byte, 0, len(q.Labels)+1)
	for k, v := range q.Labels {
		terms = append(terms, labelPrefix(k, v))
	}
	slices.SortFunc(terms, bytes.Compare)
	base := pfxRun
	if state != "" {
		base = runStatePrefix(string(state))
		terms = append(terms, base)
	}
	examined := 0
	var serr error
	// seek returns the largest id under term that is at or below bound
	// (strictly below when strict; top: no bound).
	seek := func(term []byte, bound string, top, strict bool) (string, bool) {
		examined++
		var start []byte
		if !top {
			start = cat(term, []byte(bound))
		}
		var id string
		found := false
		if err := r.Scan(term, start, true, func(k, _ []byte) bool {
			got := string(k[len(term):])
			if strict && !top && got == bound {
				return true
			}
			id, found = got, true
			return false
		}); err != nil && serr == nil {
			serr = err
		}
		return id, found
	}
	// decided is the last id known not to be (or already listed as) a
	// match with every id between it and the candidate decided too: the
	// cursor that resumes exactly where this page stopped.
	decided := cursor
	cand, ok := seek(terms[0], cursor, cursor == "", true)
	agree, i := 1, 1%len(terms)
	for ok && serr == nil {
		if agree < len(terms) {
			if examined >= maxListScan && decided != "" {
				return out, decided, nil
			}
			var x string
			if x, ok = seek(terms[i], cand, false, false); ok {
				if x == cand {
					agree++
				} else {
					decided, cand, agree = cand, x, 1
				}
			}
			i = (i + 1) % len(terms)
			continue
		}
		// Every term holds cand: the record decides the rest.
		run, err := getJSON[Run](r, runKey(cand))
		if err != nil {
			return out, "", err
		}
		if run != nil && q.match(run) {
			if out = append(out, run); len(out) == limit {
				// As the scan: a next cursor iff any run follows it.
				_, more := seek(base, cand, false, true)
				if serr != nil || !more {
					return out, "", serr
				}
				return out, cand, nil
			}
		}
		decided = cand
		if examined >= maxListScan {
			return out, decided, nil
		}
		cand, ok = seek(terms[i], cand, false, true)
		agree, i = 1, (i+1)%len(terms)
	}
	return out, "", serr
}
