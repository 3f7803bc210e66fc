package netcut

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// TestRuleset: both directions, both port fields, the table and the output hook.
func TestRuleset(t *testing.T) {
	got := Ruleset("netcut_1_2", []string{"127.1.0.5"}, []string{"127.1.0.6", "127.1.0.7"}, []int{6379, 16379})
	for _, want := range []string{
		"table inet netcut_1_2 {",
		"type filter hook output priority 0; policy accept;",
		"ip saddr { 127.1.0.5 } ip daddr { 127.1.0.6, 127.1.0.7 } tcp dport { 6379, 16379 } drop",
		"ip saddr { 127.1.0.5 } ip daddr { 127.1.0.6, 127.1.0.7 } tcp sport { 6379, 16379 } drop",
		"ip saddr { 127.1.0.6, 127.1.0.7 } ip daddr { 127.1.0.5 } tcp dport { 6379, 16379 } drop",
		"ip saddr { 127.1.0.6, 127.1.0.7 } ip daddr { 127.1.0.5 } tcp sport { 6379, 16379 } drop",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the ruleset lacks %q:\n%s", want, got)
		}
	}
}

// TestStaleTables: only cut tables of dead processes are stale.
func TestStaleTables(t *testing.T) {
	listing := "table inet filter\ntable inet netcut_100_1\ntable inet netcut_200_3\ntable inet netcut_x_1\n"
	got := StaleTables(listing, func(pid int) bool { return pid == 200 })
	if fmt.Sprint(got) != "[netcut_100_1]" {
		t.Errorf("stale tables %v, want [netcut_100_1]", got)
	}
}

// TestCutDropsAndHealRestores starts two redis-servers on their own loopback addresses (as
// the local cluster's pods are) and proves that a cut between them stalls a connection
// opened before it and refuses a new one, while a client at 127.0.0.1 still reaches both;
// that Heal lets both through again; and that the cut's table is gone after Heal.
func TestCutDropsAndHealRestores(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip(err)
	}
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	port := ports[0]
	// 127.2.0.0/16 is loopback too, and outside the local clusters' pod ranges (127.1.0.0/16).
	third := os.Getpid() % 250
	a, b := fmt.Sprintf("127.2.%d.1", third), fmt.Sprintf("127.2.%d.2", third)
	for _, ip := range []string{a, b} {
		dir := t.TempDir()
		proc, err := localcluster.StartProcess("redis-server", bin, filepath.Join(dir, "redis.log"),
			[]string{"--port", strconv.Itoa(port), "--bind", ip, "--bind-source-addr", ip, "--dir", dir, "--save", "", "--daemonize", "no", "--protected-mode", "no"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proc.Stop(5 * time.Second) })
		if err := proc.WaitFor(10*time.Second, func() error { return ping(nil, "", ip, port) }); err != nil {
			t.Fatal(err)
		}
	}
	held, err := dialFrom(b, a, port)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	if err := ping(held, b, a, port); err != nil {
		t.Fatalf("before the cut, %s cannot reach %s: %v", b, a, err)
	}

	cut := Between(t, []string{a}, []string{b}, port)
	if err := ping(held, b, a, port); err == nil {
		t.Errorf("a connection from %s to %s opened before the cut still answers", b, a)
	}
	for _, dir := range [][2]string{{b, a}, {a, b}} {
		if err := ping(nil, dir[0], dir[1], port); err == nil {
			t.Errorf("during the cut, %s reaches %s", dir[0], dir[1])
		}
	}
	for _, ip := range []string{a, b} {
		if err := ping(nil, "", ip, port); err != nil {
			t.Errorf("during the cut, a client at 127.0.0.1 cannot reach %s: %v", ip, err)
		}
	}

	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range [][2]string{{b, a}, {a, b}} {
		if err := ping(nil, dir[0], dir[1], port); err != nil {
			t.Errorf("after the heal, %s cannot reach %s: %v", dir[0], dir[1], err)
		}
	}
	out, err := exec.Command("nft", "list", "tables", "inet").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), cut.Table) {
		t.Errorf("the table %s is still there after Heal:\n%s", cut.Table, out)
	}
}

// dialFrom opens a TCP connection from address from (any port) to to:port, within a second.
func dialFrom(from, to string, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return d.Dial("tcp", net.JoinHostPort(to, strconv.Itoa(port)))
}

// ping sends PING on c (a new connection from from to to:port when c is nil) and waits a
// second for PONG.
func ping(c net.Conn, from, to string, port int) error {
	if c == nil {
		var err error
		if c, err = dialFrom(from, to, port); err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
	}
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("%s answered %q", to, line)
	}
	return nil
}
