// Package observe holds one look at every node of a Redis Cluster: the Snapshot and its
// Observations, how it is taken (Observe: one pipelined round trip per node on a
// conn.Pool), and the views every judge reads from it (the answering and joined nodes,
// the merged cluster of Known nodes, each view's slot Routes, the member record, a node's
// memory).
//
// It sits on floor 2 of internal/rediscluster and imports conn and nodes. It judges
// nothing: the health judge, the recovery planner and the step planner read it.
package observe
