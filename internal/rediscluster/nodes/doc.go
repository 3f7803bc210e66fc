// Package nodes holds the Redis Cluster wire model: CLUSTER NODES and CLUSTER INFO parsed, slot ranges and their arithmetic.
//
// It is the floor of internal/rediscluster: it imports nothing of the project, and every
// other Redis Cluster package (the connections, the layout arithmetic, the snapshot, the
// judges, the planner and the executor) reads nodes and slots through it.
package nodes
