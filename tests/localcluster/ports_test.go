package localcluster

import (
	"fmt"
	"net"
	"testing"
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
