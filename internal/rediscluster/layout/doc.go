// Package layout holds redis-cli's arithmetic, pure: a new cluster's layout (Create, the
// Plan that Admin.Create carries out), the slot moves of a rebalance and of a reshard
// (Rebalance, Reshard, computed as `redis-cli --cluster` computes them, float32 rounding
// and all), and the add-node and del-node plans (AddNode, DelNode).
//
// It sits on floor 1 of internal/rediscluster and imports only nodes: no connection, no
// clock, so every function here is a table test. The executor carries its plans out and
// the planner sizes its steps with them.
package layout
