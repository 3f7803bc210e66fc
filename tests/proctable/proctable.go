// Package proctable reads the machine's process table from /proc: which process is whose
// child and in which process group, for the local cluster's pod runner and for tests that
// check what a process tree leaves behind.
package proctable

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is one process: its ID, its parent's and its process group's.
type Proc struct {
	PID, PPID, PGRP int
}

// List returns every process /proc shows (those that end while it reads are left out).
func List() []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 3 {
			continue
		}
		ppid, err1 := strconv.Atoi(fields[1])
		pgrp, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil {
			out = append(out, Proc{pid, ppid, pgrp})
		}
	}
	return out
}

// Descendants lists every process below pid.
func Descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range List() {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// Group lists the processes of process group pgrp.
func Group(pgrp int) []int {
	var out []int
	for _, p := range List() {
		if p.PGRP == pgrp {
			out = append(out, p.PID)
		}
	}
	return out
}
