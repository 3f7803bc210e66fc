// Package redis drives Redis Cluster over the Redis protocol, the way `redis-cli --cluster
// create` and `redis-cli --cluster check` do, without running redis-cli.
//
// It has three layers, each usable alone:
//
//   - a typed model of CLUSTER NODES and CLUSTER INFO (ParseClusterNodes, ParseClusterInfo);
//   - pure planning: PlanCreate turns a list of endpoints into masters, their hash slots and
//     their replicas, with replicas kept off their master's host where possible;
//   - Admin, a set of go-redis clients that creates a cluster from a Plan and checks a
//     running cluster.
//
// Admin.Create never touches a node that is already part of a cluster, holds slots or
// stores keys: an existing cluster is never re-created, reset or flushed.
package redis
