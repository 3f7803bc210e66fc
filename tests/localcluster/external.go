package localcluster

import "time"

// Process is a program a test runs next to the cluster (an operator, OLM, a catalog server)
// with the lifecycle of the cluster's own components: its own process group, killed when the
// test process dies, its output in a log file.
type Process struct{ p *process }

// StartProcess runs bin with args and, besides this process's environment, env; its output
// goes to logPath.
func StartProcess(name, bin, logPath string, args, env []string) (*Process, error) {
	p, err := startProcess(name, bin, logPath, args, env)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace. It is safe to call more
// than once.
func (p *Process) Stop(grace time.Duration) { p.p.stop(grace) }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// Pid is the process id.
func (p *Process) Pid() int { return p.p.cmd.Process.Pid }

// LogTail returns the last lines of the process's log.
func (p *Process) LogTail(lines int) string { return p.p.logTail(lines) }

// WaitFor polls check until it returns nil, the process exits, or timeout passes; the error
// then carries the last log lines.
func (p *Process) WaitFor(timeout time.Duration, check func() error) error {
	return p.p.waitFor(timeout, check)
}

// FreePorts returns n distinct free loopback TCP ports.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

// WriteKubeconfig writes a kubeconfig for the cluster that authenticates with token, for
// example a ServiceAccount's, so a program runs with that account's RBAC.
func (c *Cluster) WriteKubeconfig(path, token string) error {
	return writeKubeconfig(path, c.Config.Host, c.Config.CAData, token)
}
