package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one running component of the control plane.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
	// env is the environment added to this process's own.
	env []string
	// ready, when set, says whether the component serves (Resume waits for it).
	ready func() error
}

// spawner starts every child from one OS thread that lives as long as the program, so the
// children's parent-death signal (SIGKILL) fires only when this process dies, never when the
// Go runtime retires a thread.
var spawner = sync.OnceValue(func() chan func() {
	requests := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread stays for the process's lifetime
		for fn := range requests {
			fn()
		}
	}()
	return requests
})

// startProcess runs bin with args, logging its output to logPath.
func startProcess(name, bin, logPath string, args []string, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // a resumed component logs on
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	result := make(chan error, 1)
	spawner() <- func() { result <- cmd.Start() }
	if err := <-result; err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("while starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, env: env, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError is why the process ended; an exit status 0 is an error too for a server.
func (p *process) exitError() error {
	if p.err != nil {
		return p.err
	}
	return errors.New("exit status 0")
}

// stop sends SIGTERM to the process group, then SIGKILL after the grace period.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// again starts a new process with the same binary, arguments, environment and log.
func (p *process) again() (*process, error) {
	np, err := startProcess(p.name, p.cmd.Path, p.logPath, p.cmd.Args[1:], p.env)
	if err != nil {
		return nil, err
	}
	np.ready = p.ready
	return np, nil
}

// logTail returns the last lines of the process's log, for error messages.
func (p *process) logTail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(string(bytes.TrimSpace(data)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitFor polls check until it returns nil, the process exits, or the timeout passes.
func (p *process) waitFor(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p.exited() {
			tail := p.logTail(20)
			if strings.Contains(strings.ToLower(tail), "address already in use") {
				return fmt.Errorf("%s exited: %w (%w); last log lines:\n%s", p.name, errPortTaken, p.exitError(), tail)
			}
			return fmt.Errorf("%s exited: %w; last log lines:\n%s", p.name, p.exitError(), tail)
		}
		if last = check(); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %w; last log lines:\n%s", p.name, timeout, last, p.logTail(20))
}

// errPortTaken marks a component that exited because another process had bound its port
// between freePorts drawing it and the component binding it.
var errPortTaken = errors.New("another process bound its port first")

// freePorts returns n distinct free loopback TCP ports, drawn at random below the kernel's
// ephemeral range (listenPorts): a port the kernel hands out for listen(":0") can be handed
// to an outgoing connection's local end before the process it was picked for binds it (a
// test run opens thousands of Redis connections; kube-apiserver once failed with "address
// already in use" that way).
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no free port in %d-%d after %d tries", listenPorts.low, listenPorts.high, tries)
		}
		port := listenPorts.low + rand.IntN(listenPorts.high-listenPorts.low)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		listeners = append(listeners, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// listenPorts is where freePorts draws ports: from 20000 to the start of the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768 by default).
var listenPorts = func() (r struct{ low, high int }) {
	r.low, r.high = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil && start > r.low+1000 {
				r.high = start
			}
		}
	}
	return r
}()
