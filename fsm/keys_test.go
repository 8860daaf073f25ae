package fsm

import (
	"bytes"
	"testing"
)

// The task-keyed builders give the bytes of the id-string ones.
func TestTaskKeyedMatchesTheIDKeys(t *testing.T) {
	for _, tk := range []*Task{{RunID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Key: "job"}, {RunID: "r", Key: "a/b"}, {RunID: "", Key: ""}} {
		for _, c := range []struct {
			name     string
			got, old []byte
		}{
			{"lease", leaseKeyOf(-5, tk), leaseKey(-5, tk.ID())},
			{"wake", wakeKeyOf(1_700_000_000_000, tk), wakeKey(1_700_000_000_000, tk.ID())},
			{"claim request", claimReqKeyOf("w1", "req-9", tk), claimReqKey("w1", "req-9", tk.ID())},
			{"claim request prefix", claimReqKey("w1", "req-9", tk.ID()), append(claimReqPrefix("w1", "req-9"), tk.ID()...)},
			{"ready", readyKeyOf("q", "t", -3, 42, tk), readyKey("q", "t", -3, 42, tk.ID())},
		} {
			if !bytes.Equal(c.got, c.old) {
				t.Errorf("%s key of %+v: %q, want %q", c.name, tk, c.got, c.old)
			}
			if len(c.got) != cap(c.got) {
				t.Errorf("%s key: len %d cap %d (one exact allocation)", c.name, len(c.got), cap(c.got))
			}
		}
	}
}
