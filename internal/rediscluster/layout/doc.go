// Package layout holds redis-cli's arithmetic, pure: a new cluster's layout (Create, the
// Plan that Admin.Create carries out), the slot moves of a rebalance and of a reshard
// (Rebalance, Reshard, computed as `redis-cli --cluster` computes them, float32 rounding
// and all), and the add-node and del-node plans (AddNode, DelNode). With them, the memory
// side of a slot move: a master's Room and a slot's SlotSize, which of a plan's moves fit
// in their targets (Fit), and the HeldSlot a move leaves where it is because it would not.
//
// It sits on floor 1 of internal/rediscluster and imports only nodes: no connection, no
// clock, so every function here is a table test. The executor carries its plans out and
// the planner sizes its steps with them.
package layout
