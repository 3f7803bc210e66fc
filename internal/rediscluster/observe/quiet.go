package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// keptInfoHead is infoHead in memory of its own, for a head kept (Observation.InfoHead).
func keptInfoHead(clusterInfo string) string { return strings.Clone(infoHead(clusterInfo)) }

// infoHead is the head of a CLUSTER INFO reply: the part that changes only when the
// cluster's state does, as the node wrote it, from cluster_state to cluster_my_epoch (the
// state, the slots assigned, ok, possibly failing and failing, the nodes known, the size
// and both epochs). The message counters after it change every second and are left out. A
// failover, a slot handed over, a node flagged failing or forgotten, a node that lost its
// cluster: each changes the head of some node's reply. It shares the reply's memory: for a
// head only compared, not kept (keptInfoHead copies it).
func infoHead(clusterInfo string) string {
	if i := strings.Index(clusterInfo, "cluster_stats_messages"); i >= 0 {
		return clusterInfo[:i]
	}
	return clusterInfo
}

// InfoHeads reads CLUSTER INFO from every node at addrs at once, over pool's kept
// connections, and returns each reply's head (as Observation.InfoHead keeps it) in the
// order of addrs, or, for a node that did not answer, why (errs[i], nil for the others). It
// is a quiet look's whole conversation with Redis: one short read-only command a node. The
// heads are compared and dropped, so they share the replies' memory.
func InfoHeads(ctx context.Context, pool *conn.Pool, addrs []string) (heads []string, errs []error) {
	heads, errs = make([]string, len(addrs)), make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			text, err := pool.Client(addr).ClusterInfo(ctx).Result()
			if err != nil {
				errs[i] = fmt.Errorf("while reading the cluster state of %s: %w", addr, err)
				return
			}
			heads[i] = infoHead(text)
		})
	}
	wg.Wait()
	return heads, errs
}

// TimedOut reports whether err is a read that waited out its timeout: the node is there
// but answers nothing (frozen, or cut off), so reading it again at once would only wait as
// long again.
func TimedOut(err error) bool {
	var op *net.OpError
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &op) && op.Timeout())
}
