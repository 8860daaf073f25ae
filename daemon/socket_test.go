package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestSocketModesStaleAndLive(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "run", "flowd.sock")
	l, err := listenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Dir(path))
	sock, _ := os.Stat(path)
	if st.Mode().Perm() != 0o750 || sock.Mode().Perm() != 0o660 || sock.Mode()&os.ModeSocket == 0 {
		t.Fatalf("dir %v socket %v", st.Mode(), sock.Mode())
	}
	// A live agent's socket is refused with a clear error.
	if _, err := listenUnix(path); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	// A dead agent's socket file (not unlinked) is replaced.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal("the stale socket file should still exist for this test")
	}
	l2, err := listenUnix(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
	// An existing directory keeps its mode (think /tmp).
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	l3, err := listenUnix(filepath.Join(open, "a.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l3.Close()
	if st, _ := os.Stat(open); st.Mode().Perm() != 0o777 {
		t.Fatalf("existing directory changed to %v", st.Mode().Perm())
	}
	// A regular file in the way is not deleted.
	file := filepath.Join(base, "file.sock")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, err := listenUnix(file); err == nil {
		t.Fatal("a regular file was replaced by the socket")
	}
}
