package redispods

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// memoryCgroups makes a memory cgroup for each pod's redis container, under the runner's own
// cgroup, with the container's memory limit, as a kubelet's container runtime does: a
// container that goes over it is killed by the kernel, and the kill is told apart from a
// crash by the cgroup's OOM-kill count. cgroup v1 (the memory controller's own hierarchy)
// and v2 (the unified hierarchy, when the memory controller can be enabled below the
// runner's cgroup) are supported.
type memoryCgroups struct {
	// dir is the directory the pods' cgroups are made in; "" when memory cgroups are
	// unavailable (the pods run unlimited).
	dir string
	v2  bool
}

// newMemoryCgroups finds the runner's memory cgroup and makes a directory for its pods in
// it, named after the runner's process; it says why in err when it cannot.
func newMemoryCgroups() (*memoryCgroups, error) {
	own, v2, err := ownMemoryCgroup()
	if err != nil {
		return &memoryCgroups{}, err
	}
	mount := filepath.Join(cgroupRoot, "memory")
	if v2 {
		mount = cgroupRoot
	}
	dir := filepath.Join(mount, own, fmt.Sprintf("redispods-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return &memoryCgroups{}, fmt.Errorf("while making the memory cgroup %s: %w", dir, err)
	}
	if v2 {
		// A v2 cgroup with processes cannot give controllers to its children, so dir holds
		// none: it only hands the memory controller down to the pods' cgroups.
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
			_ = os.Remove(dir)
			return &memoryCgroups{}, fmt.Errorf("while enabling the memory controller in %s: %w", dir, err)
		}
	}
	return &memoryCgroups{dir: dir, v2: v2}, nil
}

// ownMemoryCgroup is the runner's memory cgroup path (from /proc/self/cgroup) and whether
// it is cgroup v2.
func ownMemoryCgroup() (string, bool, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	defer func() { _ = f.Close() }()
	unified := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return parts[2], false, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); unified != "" && err == nil {
		return unified, true, nil
	}
	return "", false, errors.New("no memory cgroup controller in /proc/self/cgroup")
}

// available reports whether pods can be given memory limits.
func (m *memoryCgroups) available() bool { return m != nil && m.dir != "" }

// podCgroup is one pod's memory cgroup.
type podCgroup struct {
	dir string
	v2  bool
}

// forPod makes (or finds) the memory cgroup of the pod with uid and sets its limit in bytes.
func (m *memoryCgroups) forPod(uid string, limit int64) (*podCgroup, error) {
	c := &podCgroup{dir: filepath.Join(m.dir, uid), v2: m.v2}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	file, value := "memory.limit_in_bytes", strconv.FormatInt(limit, 10)
	if m.v2 {
		file = "memory.max"
		// No swap either, as a kubelet gives a container none by default.
		_ = os.WriteFile(filepath.Join(c.dir, "memory.swap.max"), []byte("0"), 0o644)
	}
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(value), 0o644); err != nil {
		return nil, fmt.Errorf("while setting the memory limit of %s: %w", c.dir, err)
	}
	return c, nil
}

// add moves the process pid (and the processes it starts afterwards) into the cgroup.
func (c *podCgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// oomKills is how many processes the kernel killed in the cgroup for its memory limit
// (oom_kill of memory.oom_control in v1, of memory.events in v2), -1 when unknown.
func (c *podCgroup) oomKills() int64 {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// remove kills what is left in the cgroup (a fork child that outlived its server) and
// removes it.
func (c *podCgroup) remove() {
	if data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for range 50 { // a killed process leaves its cgroup once it has exited
		if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// close removes the runner's cgroup directory (once every pod's is gone).
func (m *memoryCgroups) close() {
	if m.available() {
		_ = os.Remove(m.dir)
	}
}
