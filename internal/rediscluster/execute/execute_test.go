package execute

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// TestExecuteMovesResumes interrupts a large move and checks a second run of the same
// plan finishes it, and Rebalance after it, with every key kept; it also checks layout.Reshard
// against redis-cli's own reshard table.
func TestExecuteMovesResumes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, entry, masters := loadedSlotCluster(ctx, t)
	moves, err := layout.Reshard(masters, 3000, []string{masters[0].ID, masters[1].ID}, masters[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 60*time.Millisecond)
	first, err := c.admin.runMoves(short, []string{entry}, moves, MoveOptions{SlotBatch: 16})
	stop()
	t.Logf("first run: %d slots moved in %v, error %v", first.Slots, first.Elapsed.Round(time.Millisecond), err)
	if err == nil || first.Slots >= 3000 {
		t.Fatalf("the first run moved %d of 3000 slots and ended with %v: not interrupted, so nothing below tests an interruption", first.Slots, err)
	}
	// The batch under way when the context ended was finished, not left half done.
	after, err := c.admin.loadTopology(ctx, []string{entry})
	if err != nil {
		t.Fatal(err)
	}
	if open := after.openSlots(); len(open) > 0 {
		t.Errorf("the interrupted run left %d slots open: %v", len(open), open[:min(len(open), 10)])
	}
	second, err := c.admin.runMoves(ctx, []string{entry}, moves, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second run: %d slots moved", second.Slots)
	if n := first.Slots + second.Slots; n != 3000 {
		t.Errorf("%d + %d slots moved, want 3000", first.Slots, second.Slots)
	}
	res := c.healthy()
	for _, m := range res.Masters() {
		if want := nodes.CountSlots(masters[2].Slots) + 3000; m.ID == masters[2].ID && nodes.CountSlots(m.Slots) != want {
			t.Errorf("the target serves %d slots, want %d", nodes.CountSlots(m.Slots), want)
		}
	}
	readKeys(ctx, t, c.cc, 20000)

	// Interrupt a rebalance and let the next one finish it.
	short, stop = context.WithTimeout(ctx, 40*time.Millisecond)
	_, err = c.admin.Rebalance(short, []string{entry}, RebalanceOptions{Move: MoveOptions{SlotBatch: 8}})
	stop()
	t.Logf("interrupted rebalance: %v", err)
	if err == nil {
		t.Fatal("the rebalance given 40 ms was not interrupted: nothing below tests finishing an interrupted one")
	}
	if _, err := c.admin.Rebalance(ctx, []string{entry}, RebalanceOptions{}); err != nil {
		t.Fatal(err)
	}
	c.healthy()
	readKeys(ctx, t, c.cc, 20000)
	if plan := redisCliRebalancePlan(ctx, t, entry, false); plan != nil {
		t.Errorf("redis-cli still wants to move %q", plan)
	}

	// layout.Reshard gives the table redis-cli prints (and then carries out).
	topo, err := c.admin.loadTopology(ctx, []string{entry})
	if err != nil {
		t.Fatal(err)
	}
	masters = topo.masters()
	from := []string{masters[1].ID, masters[2].ID}
	moves, err = layout.Reshard(masters, 37, from, masters[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, m := range moves {
		for _, s := range m.Slots {
			ours = append(ours, fmt.Sprintf("%d from %s", s, m.Source))
		}
	}
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "reshard", entry, "--cluster-from", strings.Join(from, ","),
		"--cluster-to", masters[0].ID, "--cluster-slots", "37", "--cluster-yes").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	var theirs []string
	for _, m := range regexp.MustCompile(`(?m)^\s+Moving slot (\d+ from \S+)$`).FindAllStringSubmatch(ansiColor.ReplaceAllString(string(out), ""), -1) {
		theirs = append(theirs, m[1])
	}
	if !slices.Equal(ours, theirs) {
		t.Errorf("reshard tables differ:\nours      %q\nredis-cli %q", ours, theirs)
	}
	c.healthy()
	readKeys(ctx, t, c.cc, 20000)
}

// TestExecuteMovesStopsAtTheFence: a fence that fails (the operator lost its lease) stops
// the moves at its next check: batches handed over before stay moved, the batch whose keys
// moved is not handed over (its slots stay open for the leader's Fix), no later batch
// starts, and Fix then closes the open slots with every key kept.
func TestExecuteMovesStopsAtTheFence(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, entry, masters := loadedSlotCluster(ctx, t)
	moves, err := layout.Reshard(masters, 1000, []string{masters[0].ID}, masters[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("lease held by another replica")
	checks := 0
	fence := func(context.Context) error { // two checks per batch: before it, before the hand-over
		if checks++; checks > 5 {
			return lost
		}
		return nil
	}
	stats, err := c.admin.runMoves(ctx, []string{entry}, moves, MoveOptions{SlotBatch: 16, Fence: fence})
	if !errors.Is(err, lost) {
		t.Fatalf("runMoves returned %v, want the fence's error", err)
	}
	if stats.Slots != 32 || checks != 6 {
		t.Errorf("%d slots moved after %d fence checks, want 32 (two batches) after 6", stats.Slots, checks)
	}
	after, err := c.admin.loadTopology(ctx, []string{entry})
	if err != nil {
		t.Fatal(err)
	}
	if open := after.openSlots(); len(open) != 16 {
		t.Errorf("%d slots open after the fence stopped the third batch, want its 16: %v", len(open), open)
	}
	fixes, err := c.admin.Fix(ctx, []string{entry}, MoveOptions{})
	if err != nil || len(fixes) != 16 {
		t.Fatalf("Fix closed %d slots (%v), want 16", len(fixes), err)
	}
	c.healthy()
	readKeys(ctx, t, c.cc, 20000)
}

// loadedSlotCluster is a three-master cluster holding 20,000 keys, an entry address and
// its masters.
func loadedSlotCluster(ctx context.Context, t *testing.T) (*slotCluster, string, []nodes.Node) {
	t.Helper()
	c := newSlotCluster(ctx, t)
	entry := c.servers[0].addr
	writeKeys(ctx, t, c.cc, 20000)
	topo, err := c.admin.loadTopology(ctx, []string{entry})
	if err != nil {
		t.Fatal(err)
	}
	return c, entry, topo.masters()
}
