package testredis

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// TestStartDrawsAgainWhenAPortIsTaken: a cluster bus port taken between the draw and the
// bind (another test's process got it first) makes Start draw other ports and start the
// node, instead of failing the test.
func TestStartDrawsAgainWhenAPortIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	busy := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	s := Start(t, dir, goredis.Options{}, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-port", busy)
	if err := s.Client.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}
