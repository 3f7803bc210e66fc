// Package netcut stages network partitions between the local cluster's pods in tests. The
// pods are processes bound to 127.1.x.x addresses on the loopback interface (their Redis
// connections to each other leave from their own address, see tests/redispods), so an
// nftables rule on the output hook that drops TCP between two pod addresses cuts them apart
// while every other client (the operator, a test's writer, both at 127.0.0.1) still reaches
// them. Test machinery only: no shipped code imports it.
package netcut

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// RedisPorts are the ports a cut between Redis pods drops: 6379 (clients and replication)
// and 16379 (the cluster bus).
var RedisPorts = []int{6379, 16379}

// tablePrefix starts the name of every nftables table a cut creates; the rest is the test
// process's pid and a counter, so that cuts of parallel tests (and of other test processes)
// never share a table.
const tablePrefix = "netcut_"

// counter numbers the cuts of this process.
var counter atomic.Int64

// Cut is one staged partition: one nftables table of its own, in effect until Heal.
type Cut struct {
	// Table is the nftables table (family inet) holding the cut's rules.
	Table string
	// Start is when the rules took effect; Healed when they were removed (zero until then).
	Start, Healed time.Time
	once          sync.Once
	healErr       error
}

// Between drops every TCP packet between the addresses of side and those of others, both
// ways, to and from ports (RedisPorts when none are given): new connections are never
// answered and established ones stall, as when a network link fails without a reset. It
// removes the cut when the test ends, failed or not (Heal ends it sooner). Addresses are
// IPv4 addresses without a port. It fails the test when nft is missing (make setup installs
// it) or refuses the rules.
func Between(t testing.TB, side, others []string, ports ...int) *Cut {
	t.Helper()
	if len(side) == 0 || len(others) == 0 {
		t.Fatalf("netcut.Between needs addresses on both sides, got %v and %v", side, others)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("netcut needs nft (Debian's nftables package; make setup installs it): %v", err)
	}
	if len(ports) == 0 {
		ports = RedisPorts
	}
	removeStale(t)
	c := &Cut{Table: fmt.Sprintf("%s%d_%d", tablePrefix, os.Getpid(), counter.Add(1))}
	if err := nft(Ruleset(c.Table, side, others, ports)); err != nil {
		t.Fatalf("while cutting %v from %v: %v", side, others, err)
	}
	c.Start = time.Now()
	t.Cleanup(func() {
		if err := c.Heal(); err != nil {
			t.Errorf("while removing the cut %s: %v", c.Table, err)
		}
	})
	return c
}

// Heal removes the cut's rules (once; later calls return the first call's result). It
// returns how long the cut lasted through c.Healed.
func (c *Cut) Heal() error {
	c.once.Do(func() {
		c.healErr = nft("delete table inet " + c.Table + "\n")
		c.Healed = time.Now()
	})
	return c.healErr
}

// Ruleset is the nft script of a cut: a table with one chain on the output hook (a packet
// between two local addresses passes it once, on its way out) that drops TCP from side to
// others and from others to side whose source or destination port is one of ports, so both
// the requests to a listening port and the answers from it are lost.
func Ruleset(table string, side, others []string, ports []int) string {
	set := func(items []string) string { return "{ " + strings.Join(items, ", ") + " }" }
	portList := make([]string, len(ports))
	for i, p := range ports {
		portList[i] = strconv.Itoa(p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n", table)
	for _, dir := range [][2][]string{{side, others}, {others, side}} {
		for _, field := range []string{"dport", "sport"} {
			fmt.Fprintf(&b, "\t\tip saddr %s ip daddr %s tcp %s %s drop\n", set(dir[0]), set(dir[1]), field, set(portList))
		}
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// nft runs an nft script from its standard input.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft -f: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// removeStale deletes the tables of cuts whose test process is gone (a process killed by
// its -timeout runs no cleanup), so that a dead run's cut cannot partition a later run.
func removeStale(t testing.TB) {
	t.Helper()
	out, err := exec.Command("nft", "list", "tables", "inet").Output()
	if err != nil {
		t.Fatalf("nft list tables: %v", err)
	}
	for _, table := range StaleTables(string(out), processAlive) {
		if err := nft("delete table inet " + table + "\n"); err != nil {
			t.Logf("could not remove the stale cut %s: %v", table, err)
		}
	}
}

// StaleTables picks, from the output of "nft list tables inet", the cuts' tables whose
// process (the pid in the name) alive says is gone.
func StaleTables(listing string, alive func(pid int) bool) []string {
	var stale []string
	for line := range strings.SplitSeq(listing, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "table inet "+tablePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(name, "_")
		if pid, err := strconv.Atoi(pidText); err == nil && !alive(pid) {
			stale = append(stale, tablePrefix+name)
		}
	}
	return stale
}

// processAlive reports whether a process with pid runs.
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
