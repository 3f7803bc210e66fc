package localcluster

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestFreePortsAreBelowTheEphemeralRange: the ports are distinct, below the range the
// kernel gives outgoing connections, and free to bind.
func TestFreePortsAreBelowTheEphemeralRange(t *testing.T) {
	ports, err := freePorts(7)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p < listenPorts.low || p >= listenPorts.high {
			t.Errorf("port %d: repeated or outside %d-%d (ports %v)", p, listenPorts.low, listenPorts.high, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}

// TestOnFreePortsDrawsAgainWhenAPortWasTaken: a component whose drawn port another process
// bound first (here the test itself, between the draw and the component's bind) exits; the
// cluster stops that try, draws another port and starts the component on it.
func TestOnFreePortsDrawsAgainWhenAPortWasTaken(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is needed (make tools installs it):", err)
	}
	c := &Cluster{Dir: t.TempDir(), Ports: map[string]int{}, logf: t.Logf}
	defer c.Stop()
	var tried []int
	err = c.onFreePorts(func(ports []int) error {
		tried = append(tried, ports[0])
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		if len(tried) == 1 { // someone else binds the port before the component does
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			defer func() { _ = l.Close() }()
		}
		p, err := c.start("redis", bin, []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"})
		if err != nil {
			return err
		}
		return p.waitFor(10*time.Second, func() error { return ping(addr) })
	}, "redis")
	if err != nil {
		t.Fatalf("after tries on %v: %v", tried, err)
	}
	if len(tried) != 2 || c.Ports["redis"] != tried[1] || len(c.procs) != 1 || c.procs[0].exited() {
		t.Fatalf("tried ports %v, recorded %d, %d processes kept: want a second try on a new port and its process alone", tried, c.Ports["redis"], len(c.procs))
	}
}

// ping checks that a Redis server answers on addr (not merely that something listens).
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	reply := make([]byte, 7)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return err
	}
	if string(reply) != "+PONG\r\n" {
		return fmt.Errorf("%s answered %q", addr, reply)
	}
	return nil
}
