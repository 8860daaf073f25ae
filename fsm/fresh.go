package fsm

// Fresh reports whether the state has never been given work: it holds no
// run, definition or schedule and no task has ever finished. The leader
// raises such a cluster to the newest state-machine version every voter
// applies at once (daemon/upgrade.go): there is nothing an older version
// could read differently, and a new cluster should not wait for an
// upgrade's finalize to use what its release brings.
func (f *FSM) Fresh() bool {
	fresh := true
	err := f.View(func(r Reader) error {
		for _, pfx := range [][]byte{pfxRun, pfxDefinition, pfxSchedule} {
			if err := r.Scan(pfx, nil, false, func(_, _ []byte) bool { fresh = false; return false }); err != nil || !fresh {
				return err
			}
		}
		c, err := getJSON[Counters](r, keyCounters)
		if err == nil && c != nil && c.TasksDone > 0 {
			fresh = false
		}
		return err
	})
	return err == nil && fresh
}
