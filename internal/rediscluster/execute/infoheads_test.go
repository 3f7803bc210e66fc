package execute

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// TestInfoHeadsOverKeptConnections: a quiet look's CLUSTER INFO heads, read over the
// Admin's own kept connections, are the heads of what a client reads; a second look opens
// no connection; a look after the nodes closed every client connection answers (dialled
// again at once); a frozen node times out within the look's deadline while the others
// answer; and a node that refuses the login is an error naming it.
func TestInfoHeadsOverKeptConnections(t *testing.T) {
	const password = "heads-password"
	servers := startServers(t, 2, password, "--requirepass", password)
	addrs := addrsOf(servers)
	a := NewAdmin(password, time.Second)
	t.Cleanup(func() { _ = a.Close() })
	ctx := t.Context()

	look := func(what string) []string {
		t.Helper()
		heads, errs := a.InfoHeads(ctx, addrs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: %s: %v", what, addrs[i], err)
			}
		}
		return heads
	}
	heads := look("the first look")
	for i, addr := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password})
		info, err := c.ClusterInfo(ctx).Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, _, found := strings.Cut(info, "cluster_stats_messages")
		if !found || heads[i] != want || !strings.HasPrefix(heads[i], "cluster_state:") {
			t.Errorf("%s: head %q, want %q", addr, heads[i], want)
		}
	}
	dials := a.Connections()
	look("the second look")
	if got := a.Connections() - dials; got != 0 {
		t.Errorf("a second look opened %d connections, want 0 (kept from the first)", got)
	}

	// Every node closes every normal client connection, ours included (as a restart does).
	for _, addr := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password})
		if err := c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	dials = a.Connections()
	look("the look after the nodes closed the connections")
	if got := a.Connections() - dials; got != int64(len(addrs)) {
		t.Errorf("the look after the nodes closed the connections opened %d, want %d (one a node, dialled again)", got, len(addrs))
	}

	// A frozen node: its read times out at the look's deadline; the other answers.
	if err := servers[0].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = servers[0].cmd.Process.Signal(syscall.SIGCONT) })
	lookCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	heads, errs := a.InfoHeads(lookCtx, addrs)
	cancel()
	took := time.Since(start)
	if !observe.TimedOut(errs[0]) || !strings.Contains(errs[0].Error(), addrs[0]) {
		t.Errorf("the frozen node's read: %v, want a timeout naming %s", errs[0], addrs[0])
	}
	if errs[1] != nil || !strings.HasPrefix(heads[1], "cluster_state:") {
		t.Errorf("the other node's read beside the frozen one: %q, %v", heads[1], errs[1])
	}
	if took > 2*time.Second {
		t.Errorf("the look with a frozen node took %s, want about its 300 ms deadline", took)
	}
	_ = servers[0].cmd.Process.Signal(syscall.SIGCONT)
	look("the look after the node thawed")

	// A login the node refuses.
	wrong := NewAdmin("not-the-password", time.Second)
	t.Cleanup(func() { _ = wrong.Close() })
	if _, errs := wrong.InfoHeads(ctx, addrs[1:]); errs[0] == nil || !strings.Contains(errs[0].Error(), addrs[1]) {
		t.Errorf("a look with a wrong password: %v, want an error naming %s", errs[0], addrs[1])
	}
}
