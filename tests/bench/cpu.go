package bench

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// cpuMeter reads the CPU time of each of the local cluster's components, of this process
// (the bench's clients and, in the operator's run, the operator) and of the whole machine,
// so each wave shows where the machine's cores went.
type cpuMeter struct {
	pids map[string]int
	last map[string]float64
}

// benchProcess names this process in a cpuMeter's readings.
const benchProcess = "bench"

// machineBusy and machineTotal name the whole machine's busy and total CPU seconds.
const (
	machineBusy  = "machine busy"
	machineTotal = "machine total"
)

// newCPUMeter measures the components pids (name to process id) from now on.
func newCPUMeter(pids map[string]int) *cpuMeter {
	m := &cpuMeter{pids: maps.Clone(pids)}
	m.pids[benchProcess] = os.Getpid()
	m.last = m.read()
	return m
}

// Reset returns the CPU seconds each component used since the last Reset, with the
// machine's busy and total CPU seconds (every core's).
func (m *cpuMeter) Reset() map[string]float64 {
	now := m.read()
	since := map[string]float64{}
	for k, v := range now {
		since[k] = v - m.last[k]
	}
	m.last = now
	return since
}

func (m *cpuMeter) read() map[string]float64 {
	out := map[string]float64{}
	for name, pid := range m.pids {
		if s, err := processCPU(pid); err == nil {
			out[name] = s
		}
	}
	if busy, total, err := machineCPU(); err == nil {
		out[machineBusy], out[machineTotal] = busy, total
	}
	return out
}

// processCPU is the user and system CPU seconds process pid has used, from /proc/pid/stat.
func processCPU(pid int) (float64, error) {
	own, _, err := processAndChildrenCPU(pid)
	return own, err
}

// processAndChildrenCPU is the user and system CPU seconds process pid has used, and those of
// its children it has waited for (a redis-server's snapshot forks), from /proc/pid/stat.
func processAndChildrenCPU(pid int) (own, children float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command's closing parenthesis.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 15 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ticks [4]float64 // utime, stime, cutime, cstime: the 12th to 15th
	for i := range ticks {
		if ticks[i], err = strconv.ParseFloat(fields[11+i], 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return (ticks[0] + ticks[1]) / 100, (ticks[2] + ticks[3]) / 100, nil // clock ticks: 100 per second on Linux
}

// machineCPU is every core's busy and total CPU seconds since boot, from /proc/stat.
func machineCPU() (busy, total float64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat starts with %q", line)
	}
	var busyTicks, totalTicks uint64 // summed in ticks, so busy never rounds above total
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		totalTicks += v
		if i != 3 && i != 4 { // idle and iowait
			busyTicks += v
		}
	}
	return float64(busyTicks) / 100, float64(totalTicks) / 100, nil // 100 ticks per second
}

// cpuLine renders one wave's CPU seconds: the machine's use of its cores, then each
// component's seconds, largest first, and the busy seconds of every other process.
func cpuLine(cpu map[string]float64) string {
	if len(cpu) == 0 {
		return "not measured"
	}
	parts := []string{}
	if cpu[machineTotal] > 0 {
		parts = append(parts, fmt.Sprintf("machine %.0f%% busy", 100*cpu[machineBusy]/cpu[machineTotal]))
	}
	names := slices.DeleteFunc(slices.Collect(maps.Keys(cpu)), func(k string) bool { return k == machineBusy || k == machineTotal })
	slices.SortFunc(names, func(a, b string) int {
		if cpu[a] != cpu[b] {
			if cpu[a] > cpu[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	named := 0.0
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", n, cpu[n]))
		named += cpu[n]
	}
	if cpu[machineTotal] > 0 {
		parts = append(parts, fmt.Sprintf("the rest of the machine %.1f", cpu[machineBusy]-named))
	}
	return strings.Join(parts, ", ")
}
