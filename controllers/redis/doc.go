// Package redis holds the RedisCluster reconciler: it keeps the Kubernetes objects of a
// cluster in their desired state, forms the Redis Cluster over the Redis protocol once every
// pod runs, and reports each node's role, ids and slots in the status.
package redis
