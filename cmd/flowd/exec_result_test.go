package main

import (
	"encoding/json"
	"testing"

	"github.com/flowd/flowd/worker"
)

// The exec worker's result: JSON stdout as it is, other text as a JSON
// string (echo hello succeeds with "hello"), nothing as null.
func TestExecResultPlainTextIsAString(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{`echo hello`, `"hello"`},
		{`printf 'two\nlines\n'`, `"two\nlines"`},
		{`echo '{"ok":true}'`, `{"ok":true}`},
		{`echo 42`, `42`},
		{`true`, `null`},
	} {
		res, err := execHandler(c.cmd, 0)(t.Context(), &worker.Task{ID: "r/k", RunID: "r", Key: "k"})
		if err != nil {
			t.Errorf("%s: %v", c.cmd, err)
			continue
		}
		b, err := json.Marshal(res)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: result %s (%v), want %s", c.cmd, b, err, c.want)
		}
	}
}
