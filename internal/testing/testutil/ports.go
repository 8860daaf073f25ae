package testutil

import (
	"net"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	issued = map[int]bool{}
)

// Port returns a free loopback TCP port that no earlier call in this
// process returned. (The kernel may hand a just-closed port out again; two
// agents of one test given the same port would refuse to start.)
func Port(t testing.TB) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !issued[p] {
			issued[p] = true
			return p
		}
	}
	t.Fatal("no fresh free port")
	return 0
}
