// Package redisadmin is everything the RedisCluster controller knows about Redis Cluster,
// without Kubernetes: it observes the nodes, decides the one next step, and carries steps
// out over the Redis protocol the way `redis-cli --cluster` would, without running redis-cli.
//
// It has three layers:
//
//   - observe: Admin.Observe (package observe's Observe on the conn.Pool Admin embeds)
//     fills a Snapshot with one pipelined round trip per node on a pooled connection
//     (CLUSTER NODES, CLUSTER INFO, INFO), and package health's Assess judges it (Health:
//     what a client would see, slot by slot);
//   - plan, pure: package plan's NextStep(Spec, Snapshot, Health) returns the one Step to
//     take next (form, join, rebalance a batch, assign a batch, remove, fail over, repair
//     slots, recover, rotate a password, reload a certificate, replace a pod, or wait with a
//     reason), with redis-cli's own arithmetic underneath (package layout: Create,
//     Rebalance, Reshard, AddNode, DelNode), the recovery planner (package recovery:
//     Recover) and the memory autoscaler (package autoscale: Decide) as parts of it;
//   - act: Admin's methods that carry one step out (Create, AddNode, DelNode, Rebalance,
//     Reshard, Fix, Failover, Run), each bounded by a move budget and the caller's context.
//
// Admin.Create never touches a node that is already part of a cluster, holds slots or
// stores keys: an existing cluster is never re-created, reset or flushed.
//
// Moving slots never loses a key: for every slot, SETSLOT NODE goes to the target before
// the source and only once GETKEYSINSLOT found the source empty after the last MIGRATE; a
// MIGRATE error stops the move with the slot left open; a key on both nodes is never
// overwritten with a different value. Every operation is idempotent and can be resumed
// after an interruption: Rebalance and Reshard carry on from where the cluster is, and Fix
// finishes or rolls back the slots an interrupted move left open.
package redisadmin
