// Package redis drives Redis Cluster over the Redis protocol the way `redis-cli --cluster`
// does, without running redis-cli: create, check, add-node, del-node, reshard, rebalance
// and fix, plus the manual failover an upgrade needs.
//
// It has three layers, each usable alone:
//
//   - a typed model of CLUSTER NODES and CLUSTER INFO (ParseClusterNodes, ParseClusterInfo);
//   - pure planning, with redis-cli's own arithmetic: PlanCreate lays out masters, slots
//     and replicas; PlanRebalance and PlanReshard compute slot moves; PlanAddNode and
//     PlanDelNode say how a node joins or leaves;
//   - Admin, a set of go-redis clients that carries plans out and checks a running cluster:
//     Create, Check, AddNode, DelNode, MoveSlot (one slot, exactly as redis-cli moves it),
//     ExecuteMoves (a whole plan, source/target pairs in parallel and each step pipelined
//     for a batch of slots), Rebalance, Reshard, Fix and Failover.
//
// Admin.Create never touches a node that is already part of a cluster, holds slots or
// stores keys: an existing cluster is never re-created, reset or flushed.
//
// Moving slots never loses a key: for every slot, SETSLOT NODE goes to the target before
// the source and only once GETKEYSINSLOT found the source empty after the last MIGRATE; a
// MIGRATE error stops the move with the slot left open; a key on both nodes is never
// overwritten with a different value. Every operation is idempotent and can be resumed
// after an interruption: ExecuteMoves, Rebalance and Reshard carry on from where the
// cluster is, and Fix finishes or rolls back the slots an interrupted move left open.
package redis
