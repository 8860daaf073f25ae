package daemon

import (
	"testing"

	"github.com/flowd/flowd/rpc"
)

// The agent has a handler for every row of rpc's method table and none for
// a method the table does not have; the lists derived from the table's
// flags name only methods the agent serves.
func TestHandlersMatchMethodTable(t *testing.T) {
	a := newAgent(Config{NodeID: "n1"}, NewLogger("error", ""))
	handlers := a.methodTable()
	rows := map[string]bool{}
	for _, m := range rpc.Methods() {
		rows[m.Name] = true
		if handlers[m.Name] == nil {
			t.Errorf("%s is in rpc's method table but has no handler in methodTable", m.Name)
		}
	}
	for name := range handlers {
		if !rows[name] {
			t.Errorf("%s has a handler but no row in rpc's method table", name)
		}
	}
	served := a.methods()
	if len(served) != len(handlers) {
		t.Errorf("methods() serves %d methods, methodTable has %d", len(served), len(handlers))
	}
	for what, set := range map[string]map[string]bool{"unfenced": unfenced, "healthExempt": healthExempt, "nodeAddressed": nodeAddressed} {
		if len(set) == 0 {
			t.Errorf("%s is empty", what)
		}
		for name := range set {
			if handlers[name] == nil {
				t.Errorf("%s names %s, which has no handler", what, name)
			}
		}
	}
}
