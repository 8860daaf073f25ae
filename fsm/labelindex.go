package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/flowd/flowd/fsm/domain"
	"github.com/flowd/flowd/fsm/store"
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

// maxExistsValues bounds the distinct values a selector's k term is served
// from the index by: up to it, the term is the union of its pairs'
// prefixes (each ordered by run id); a key with more values (a per-run id,
// say) would cost a seek per value per step, so the term is checked on
// each run read instead. A variable so tests can lower it.
var maxExistsValues = 16

// labelTerm is one term of the intersection: the union of its prefixes
// (one for a pair or a state, one per value for a k term).
type labelTerm [][]byte

// existsTerm is the union of key k's pairs' prefixes, or false when the key
// has more than maxExistsValues values. It walks the values by skipping
// past each pair's prefix, one seek per value.
func existsTerm(r Reader, k string) (labelTerm, bool, error) {
	kp := appendLabelPrefix(nil, k, "")
	kp = kp[:len(kp)-1] // the key's part, without the value's length
	var out labelTerm
	var start []byte
	for {
		var pair []byte
		var bad error
		if err := r.Scan(kp, start, false, func(key, _ []byte) bool {
			lv, n := binary.Uvarint(key[len(kp):])
			if n <= 0 || uint64(len(key)-len(kp)-n) < lv {
				bad = fmt.Errorf("label index key %q is malformed", key)
				return false
			}
			pair = bytes.Clone(key[:len(kp)+n+int(lv)])
			return false
		}); err != nil || bad != nil {
			return nil, false, firstErr(err, bad)
		}
		if pair == nil {
			return out, true, nil
		}
		if len(out) == maxExistsValues {
			return nil, false, nil
		}
		out = append(out, pair)
		start = store.PrefixEnd(pair) // never nil: the value's length byte is below 0x80
	}
}

// labelTerms are q's terms the index serves, sorted, and false when it
// serves none (the filter's selector terms are all k!=v, !k, or k terms of
// keys with too many values).
func labelTerms(r Reader, q RunFilter) ([]labelTerm, bool, error) {
	terms := make([]labelTerm, 0, len(q.Labels)+len(q.Selector)+1)
	for k, v := range q.Labels {
		terms = append(terms, labelTerm{labelPrefix(k, v)})
	}
	for _, t := range q.Selector {
		switch t.Op {
		case domain.SelEquals:
			terms = append(terms, labelTerm{labelPrefix(t.Key, t.Value)})
		case domain.SelExists:
			term, ok, err := existsTerm(r, t.Key)
			if err != nil {
				return nil, false, err
			}
			if ok {
				terms = append(terms, term)
			}
		}
	}
	slices.SortFunc(terms, func(a, b labelTerm) int {
		if len(a) == 0 || len(b) == 0 {
			return len(a) - len(b)
		}
		return bytes.Compare(a[0], b[0])
	})
	return terms, len(terms) > 0, nil
}

// listByLabels is ListRunsWhere for a filter with labels or selector terms
// (see above); it appends to out and returns the next cursor. A filter the
// index cannot narrow is listed by the scan.
func listByLabels(r Reader, state domain.RunState, q RunFilter, limit int, cursor string, out []*Run) ([]*Run, string, error) {
	terms, ok, err := labelTerms(r, q)
	if err != nil {
		return out, "", err
	}
	if !ok {
		return listByScan(r, state, q, limit, cursor, out)
	}
	base := pfxRun
	if state != "" {
		base = runStatePrefix(string(state))
		terms = append(terms, labelTerm{base})
	}
	examined := 0
	var serr error
	// seek returns the largest id under one of term's prefixes that is at
	// or below bound (strictly below when strict; top: no bound).
	seek := func(term labelTerm, bound string, top, strict bool) (string, bool) {
		var id string
		found := false
		for _, pfx := range term {
			examined++
			var start []byte
			if !top {
				start = cat(pfx, []byte(bound))
			}
			if err := r.Scan(pfx, start, true, func(k, _ []byte) bool {
				got := string(k[len(pfx):])
				if strict && !top && got == bound {
					return true
				}
				if !found || got > id {
					id, found = got, true
				}
				return false
			}); err != nil && serr == nil {
				serr = err
			}
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
			// At the bound, stop once this page decided something (a
			// cursor equal to the one given would never get further).
			if examined >= maxListScan && decided != cursor {
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
				_, more := seek(labelTerm{base}, cand, false, true)
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
