package tui

import (
	"os"
	"strings"
	"testing"
)

// docs/operations.md's TUI key table and this package's README list every
// screen by its key and name: a screen added here and not there fails.
func TestDocsListEveryScreen(t *testing.T) {
	k := NewKeyMap(false)
	for _, doc := range []string{"../docs/operations.md", "README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		row := ""
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "| `1`–`"+itoa(int(numScreens))+"` |") {
				row = l
			}
		}
		if row == "" {
			t.Errorf("%s: no key table row for the screens `1`–`%d`", doc, numScreens)
			continue
		}
		for i, b := range k.Screens {
			if name := strings.TrimSuffix(b.Help().Desc, " tasks"); !strings.Contains(row, name) {
				t.Errorf("%s: the screens row lacks screen %d (%s): %s", doc, i+1, name, row)
			}
		}
	}
}
