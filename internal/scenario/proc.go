package scenario

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/txbox/txbox/internal/testenv"
)

// Proc is a txbox process run by a test.
type Proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan struct{}
	// started is when the process was started (Term).
	started time.Time
}

// Start runs bin with args; its output is logged if the test fails.
func Start(t *testing.T, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, cmd: exec.Command(bin, args...), out: &testenv.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	p.started = time.Now()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output of txbox %v:\n%s", args, tail(p.out.String(), 4000))
		}
	})
	return p
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Term sends SIGTERM and waits up to d for a clean exit; it reports whether
// the process exited with status 0 in time.
//
// A SIGTERM that arrives before the process's main has asked for it
// (signal.NotifyContext, its first step) kills the process as the default
// action does; a run whose work was already done when it started is
// stopped that early. So Term first lets the process live termGrace.
func (p *Proc) Term(d time.Duration) bool {
	if young := termGrace - time.Since(p.started); young > 0 {
		select {
		case <-p.done:
		case <-time.After(young):
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.cmd.ProcessState.Success()
	case <-time.After(d):
		p.Kill()
		return false
	}
}

// termGrace is how long a process lives before Term signals it: main's
// first step takes milliseconds, loading the binary a little more.
const termGrace = time.Second

// Output is what the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// RunCmd runs bin to completion and returns its combined output.
func RunCmd(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
