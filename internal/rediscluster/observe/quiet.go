package observe

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"

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

// InfoHeads reads CLUSTER INFO from every node at addrs at once, over pool's connections
// kept for it (conn.Pool.ClusterInfos), and returns each reply's head (as
// Observation.InfoHead keeps it) in the order of addrs, or, for a node that did not answer,
// why (errs[i], nil for the others). It is a quiet look's whole conversation with Redis: one
// short read-only command a node.
func InfoHeads(ctx context.Context, pool *conn.Pool, addrs []string) (heads []string, errs []error) {
	heads = make([]string, len(addrs))
	errs = pool.ClusterInfos(ctx, addrs, func(i int, reply []byte) { heads[i] = string(infoHeadBytes(reply)) })
	return heads, errs
}

// infoHeadBytes is infoHead of a reply read into a buffer.
func infoHeadBytes(clusterInfo []byte) []byte {
	if i := bytes.Index(clusterInfo, []byte("cluster_stats_messages")); i >= 0 {
		return clusterInfo[:i]
	}
	return clusterInfo
}

// TimedOut reports whether err is a read that waited out its timeout: the node is there
// but answers nothing (frozen, or cut off), so reading it again at once would only wait as
// long again.
func TimedOut(err error) bool {
	var op *net.OpError
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &op) && op.Timeout())
}
