package testenv

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// StartLogged starts cmd with its stdout and stderr in one buffer the test
// can read while it runs; exited is closed once the process has exited and
// been waited for.
func StartLogged(t testing.TB, cmd *exec.Cmd) (logs *SyncBuffer, exited <-chan struct{}) {
	t.Helper()
	logs = &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return logs, done
}

// StopProcess sends sig to p and waits up to grace for exited; a process
// still running then is killed and waited for. It reports whether the
// process stopped on sig.
func StopProcess(p *os.Process, sig os.Signal, exited <-chan struct{}, grace time.Duration) bool {
	_ = p.Signal(sig)
	select {
	case <-exited:
		return true
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
		return false
	}
}
