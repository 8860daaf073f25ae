package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// listenUnix creates the agent's socket: the directory is created 0750, the
// socket 0660. A socket file left by a dead agent is replaced; one that a
// live process still answers on is refused.
func listenUnix(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Only a directory we create gets our mode; an existing one (say
		// /tmp) is left as it is.
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it or choose another --socket", path)
		}
		c, err := net.DialTimeout("unix", path, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: another flowd agent is serving %s; stop it or choose another --socket", ErrSocketInUse, path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("probe existing socket %s: %w", path, err)
		}
		// Stale: nobody listens. Replace it.
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	old := syscall.Umask(0o117)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	return l, nil
}
