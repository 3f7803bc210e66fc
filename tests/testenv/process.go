package testenv

import (
	"os"
	"os/exec"
	"time"
)

// StopProcess returns a function that stops the started cmd as a kubelet stops a pod: an
// interrupt, then a kill after 20 s; then it closes log (the process's output).
func StopProcess(cmd *exec.Cmd, log *os.File) func() {
	return func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = log.Close()
	}
}
