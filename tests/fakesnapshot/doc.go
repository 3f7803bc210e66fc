// Package fakesnapshot builds Redis Cluster snapshots for table tests, without a server: a
// healthy cluster of a few shards (Six, Eight, ThreeShards, New) whose every node answers
// and knows every other, and the methods that break it (silence a pod, flag a node fail,
// promote a replica, add a fresh node, set memory figures). The tests of the pure judges
// and planners under internal/rediscluster share it. It imports only the snapshot's
// packages (observe, nodes), never the packages whose tests use it.
package fakesnapshot
