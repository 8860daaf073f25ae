package worker

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flowd/flowd/rpc"
)

// Long lines through a LogWriter, in writes of any size: one kept line per
// line written, each the line itself or, over rpc.MaxLogLineBytes, its
// head and "…" — never an empty line the writer did not write, and the
// same lines whatever the write sizes.
func TestLogWriterLongLinesArePrefixes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []string
	for i := range 12 {
		n := []int{10, rpc.MaxLogLineBytes - 1, rpc.MaxLogLineBytes, rpc.MaxLogLineBytes + 1, 5000, 9000, 3 * rpc.MaxLogLineBytes}[i%7]
		lines = append(lines, strings.Repeat(string(rune('a'+i)), n))
	}
	text := strings.Join(lines, "\n") + "\n"
	want := keptLines(t, text, []int{len(text)})
	if len(want) != len(lines) {
		t.Fatalf("one write: %d lines kept, want %d", len(want), len(lines))
	}
	for i, got := range want {
		head, cut := strings.CutSuffix(got, "…")
		if got == "" || !strings.HasPrefix(lines[i], head) || (cut != (len(lines[i]) > rpc.MaxLogLineBytes)) ||
			(cut && len(head) != rpc.MaxLogLineBytes) || (!cut && got != lines[i]) {
			t.Fatalf("line %d (%d bytes) kept as %d bytes %q…", i, len(lines[i]), len(got), got[:min(len(got), 20)])
		}
	}
	for range 50 {
		var sizes []int
		for left := len(text); left > 0; {
			n := min(left, 1+rng.IntN(2*rpc.MaxLogLineBytes))
			if rng.IntN(4) == 0 {
				n = min(left, 1+rng.IntN(8))
			}
			sizes = append(sizes, n)
			left -= n
		}
		got := keptLines(t, text, sizes)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("writes of %v: %d lines kept, want the %d of one write", sizes, len(got), len(want))
		}
	}
}

// Writes that end exactly where a long line's newline starts kept an
// empty line for that newline.
func TestLogWriterNewlineAfterCutLine(t *testing.T) {
	long := strings.Repeat("x", rpc.MaxLogLineBytes+1)
	got := keptLines(t, long+"\n"+long+"\nend\n", []int{len(long), 1, len(long), 5})
	if len(got) != 3 || got[2] != "end" {
		var sizes []int
		for _, l := range got {
			sizes = append(sizes, len(l))
		}
		t.Fatalf("kept %d lines of %v bytes, want 3 ending with end", len(got), sizes)
	}
}

func keptLines(t *testing.T, text string, sizes []int) []string {
	t.Helper()
	var tk Task
	w := tk.LogWriter(rpc.StreamStdout)
	for _, n := range sizes {
		if _, err := w.Write([]byte(text[:n])); err != nil {
			t.Fatal(err)
		}
		text = text[n:]
	}
	tk.log.flushWriters()
	p, _ := tk.log.take()
	var out []string
	for _, l := range p.Logs {
		out = append(out, l.Line)
	}
	return out
}
