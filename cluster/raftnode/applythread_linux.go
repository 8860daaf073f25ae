package raftnode

import (
	"fmt"
	"runtime"
	"syscall"
)

const threadNiceSupported = true

// On Linux setpriority(PRIO_PROCESS, tid) acts on one thread (man 2
// setpriority, BUGS: "threads do not share a nice value").

func threadID() int { return syscall.Gettid() }

// threadNice is the calling thread's nice value.
func threadNice() (int, error) {
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		return 0, fmt.Errorf("read the apply thread's nice value: %w", err)
	}
	return 20 - raw, nil // the raw system call returns 20 - nice (1..40)
}

// setThreadNice sets the calling thread's nice value.
func setThreadNice(nice int) error {
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice); err != nil {
		return fmt.Errorf("set the apply thread's nice value to %d: %w", nice, err)
	}
	return nil
}

// canRestoreThreadPriority reports whether this process may set a thread's
// nice value back down after raising it: it tries, on a thread of its own
// that ends with the probe.
func canRestoreThreadPriority() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		base, err := threadNice()
		if err != nil || base >= 19 {
			ok <- false
			return
		}
		if setThreadNice(base+1) != nil {
			ok <- false
			return
		}
		ok <- setThreadNice(base) == nil
	}()
	return <-ok
}
