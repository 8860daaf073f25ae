package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flowd/flowd/fsm/domain"
)

// A node catching up applies many large entries in one batch: it must
// split them into transactions badger accepts (its limit is a fraction of
// the memtable), however the entries' sizes fall, and end in the same state
// as one applying them one by one. Each entry here writes ~1 MB and a few
// entries write nearly the per-entry limit.
func TestCatchUpBatchOfLargeEntriesFitsBadger(t *testing.T) {
	var entries []Entry
	for i := range 24 {
		size := 900 << 10
		if i%7 == 3 {
			size = 3 << 20 // one task's input is at most 1 MiB: spread over four tasks
		}
		var tasks []domain.TaskSpec
		for k := 0; size > 0; k++ {
			n := min(size, 900<<10)
			tasks = append(tasks, domain.TaskSpec{Key: fmt.Sprintf("t%d", k), Type: "t", Input: json.RawMessage(`"` + strings.Repeat("x", n) + `"`)})
			size -= n
		}
		cmd := &Submit{ID: fmt.Sprintf("big%02d", i), Spec: domain.Spec{Tasks: tasks}.Normalize()}
		cmd.Stamp(1_700_000_000_000)
		buf, _ := Encode(cmd)
		entries = append(entries, Entry{Index: uint64(i + 1), Data: buf})
	}
	batched := openBadgerFSM(t)
	for i, r := range batched.ApplyBatch(entries) {
		if err, isErr := r.(error); isErr {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	single := openBadgerFSM(t)
	for _, e := range entries {
		single.Apply(e)
	}
	d1, i1, _ := batched.Digest()
	d2, i2, _ := single.Digest()
	if d1 != d2 || i1 != 24 || i2 != 24 {
		t.Fatalf("batched %s@%d, one by one %s@%d", d1, i1, d2, i2)
	}
}
