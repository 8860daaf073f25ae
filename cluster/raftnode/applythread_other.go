//go:build !linux

package raftnode

// Elsewhere a nice value is the process's, not a thread's: followers apply
// on raft's goroutine at the agent's priority.
const threadNiceSupported = false

func threadID() int                  { return 0 }
func threadNice() (int, error)       { return 0, nil }
func setThreadNice(int) error        { return nil }
func canRestoreThreadPriority() bool { return false }
