package execute

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// sampledKeys is how many keys of a slot MEMORY USAGE measures for its byte estimate.
const sampledKeys = 8

// room reads n's INFO memory and returns its room (layout.RoomOf).
func (m *mover) room(ctx context.Context, n nodes.Node) (layout.Room, error) {
	text, err := m.client(n.Addr).Info(ctx, "memory").Result()
	if err != nil {
		return layout.Room{}, fmt.Errorf("while reading INFO memory of %s: %w", n.Addr, err)
	}
	info := nodes.ParseInfoFields(text, func(f string) bool {
		return f == "used_memory" || f == "maxmemory" || f == "used_memory_overhead"
	})
	num := func(f string) int64 { n, _ := strconv.ParseInt(info[f], 10, 64); return n }
	return layout.RoomOf(num("used_memory"), num("maxmemory"), num("used_memory_overhead")), nil
}

// slotSizes measures slots on n: CLUSTER COUNTKEYSINSLOT for each, and MEMORY USAGE of up
// to sampledKeys of its keys (CLUSTER GETKEYSINSLOT), whose mean times the count is the
// slot's byte estimate. Two pipelined round trips whatever the number of slots. With
// asking, each MEMORY USAGE is preceded by ASKING (n only imports the slots).
func (m *mover) slotSizes(ctx context.Context, n nodes.Node, slots []int, asking bool) (map[int]layout.SlotSize, error) {
	cmds := m.pipelined(ctx, n.Addr, func(pl goredis.Pipeliner) {
		for _, s := range slots {
			pl.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s)
			pl.Do(ctx, "CLUSTER", "GETKEYSINSLOT", s, sampledKeys)
		}
	})
	sizes := map[int]layout.SlotSize{}
	samples := map[int][]string{}
	for i, s := range slots {
		count, err := cmds[2*i].(*goredis.Cmd).Int64()
		if err != nil {
			return nil, fmt.Errorf("while running CLUSTER COUNTKEYSINSLOT %d on %s: %w", s, n.Addr, err)
		}
		keys, err := cmds[2*i+1].(*goredis.Cmd).StringSlice()
		if err != nil {
			return nil, fmt.Errorf("while running CLUSTER GETKEYSINSLOT %d on %s: %w", s, n.Addr, err)
		}
		sizes[s] = layout.SlotSize{Keys: count}
		if len(keys) > 0 {
			samples[s] = keys
		}
	}
	sampled := slices.Sorted(maps.Keys(samples))
	cmds = m.pipelined(ctx, n.Addr, func(pl goredis.Pipeliner) {
		for _, s := range sampled {
			for _, k := range samples[s] {
				if asking {
					pl.Do(ctx, "ASKING")
				}
				pl.Do(ctx, "MEMORY", "USAGE", k)
			}
		}
	})
	i := 0
	for _, s := range sampled {
		var total, measured int64
		for range samples[s] {
			if asking {
				i++ // ASKING's OK
			}
			v, err := cmds[i].(*goredis.Cmd).Int64()
			i++
			switch {
			case err == nil:
				total, measured = total+v, measured+1
			case errors.Is(err, goredis.Nil), strings.HasPrefix(err.Error(), "ASK "), strings.HasPrefix(err.Error(), "MOVED "):
				// The key moved or expired since GETKEYSINSLOT: not measured.
			case strings.HasPrefix(err.Error(), "NOPERM"):
				// A node started before the operator's user was granted MEMORY USAGE (its
				// rules reach a node at its start): the node's mean key size stands in.
				return m.meanSizes(ctx, n, sizes)
			default:
				return nil, fmt.Errorf("while running MEMORY USAGE on %s: %w", n.Addr, err)
			}
		}
		if measured > 0 {
			size := sizes[s]
			size.Bytes = size.Keys * (total / measured)
			sizes[s] = size
		}
	}
	return sizes, nil
}

// meanSizes estimates each slot of sizes by its keys times n's mean bytes a key (its whole
// used memory over DBSIZE: an over-estimate, as the room check wants).
func (m *mover) meanSizes(ctx context.Context, n nodes.Node, sizes map[int]layout.SlotSize) (map[int]layout.SlotSize, error) {
	r, err := m.room(ctx, n)
	if err != nil {
		return nil, err
	}
	keys, err := m.client(n.Addr).DBSize(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("while running DBSIZE on %s: %w", n.Addr, err)
	}
	return meanSizesOf(sizes, r.Holds, keys), nil
}

// meanSizesOf gives each slot of sizes its keys times used/keys bytes. It is pure.
func meanSizesOf(sizes map[int]layout.SlotSize, used, keys int64) map[int]layout.SlotSize {
	out := make(map[int]layout.SlotSize, len(sizes))
	for s, size := range sizes {
		if keys > 0 {
			size.Bytes = size.Keys * (used / keys)
		}
		out[s] = size
	}
	return out
}

// measureMoves gathers the facts layout.Fit needs for moves: the room of every master of
// the plan and, for the moves whose target's room is in question (layout.InQuestion), the
// size of each slot on its source. A plan between masters with room for everything costs
// one INFO each.
func (m *mover) measureMoves(ctx context.Context, topo *topology, moves []layout.Move) (layout.MoveFacts, error) {
	facts := layout.MoveFacts{Sizes: map[int]layout.SlotSize{}, Rooms: map[string]layout.Room{}}
	for _, mv := range moves {
		for _, id := range []string{mv.Source, mv.Target} {
			if _, ok := facts.Rooms[id]; ok {
				continue
			}
			n := topo.node(id)
			if n == nil {
				return facts, fmt.Errorf("move %s: node %s not in the cluster", mv, id)
			}
			r, err := m.room(ctx, *n)
			if err != nil {
				return facts, err
			}
			facts.Rooms[id] = r
		}
	}
	question := layout.InQuestion(moves, facts.Rooms)
	bySource := map[string][]int{}
	var order []string
	for _, mv := range moves {
		if !question[mv.Target] {
			continue
		}
		if _, ok := bySource[mv.Source]; !ok {
			order = append(order, mv.Source)
		}
		bySource[mv.Source] = append(bySource[mv.Source], mv.Slots...)
	}
	for _, id := range order {
		sizes, err := m.slotSizes(ctx, *topo.node(id), bySource[id], false)
		if err != nil {
			return facts, err
		}
		for s, size := range sizes {
			facts.Sizes[s] = size
		}
	}
	return facts, nil
}

// openSlotFacts measures a half-moved slot: its keys left on owner and already on target,
// and the room of each.
func (m *mover) openSlotFacts(ctx context.Context, s int, owner, target nodes.Node) (halfMovedSlot, error) {
	var f halfMovedSlot
	left, err := m.slotSizes(ctx, owner, []int{s}, false)
	if err != nil {
		return f, err
	}
	moved, err := m.slotSizes(ctx, target, []int{s}, true)
	if err != nil {
		return f, err
	}
	f.Left, f.Moved = left[s], moved[s]
	if f.OwnerRoom, err = m.room(ctx, owner); err != nil {
		return f, err
	}
	if f.TargetRoom, err = m.room(ctx, target); err != nil {
		return f, err
	}
	return f, nil
}

// isOOM reports an error that is, or carries, Redis's OOM answer (a MIGRATE's target
// refusing the keys past its maxmemory).
func isOOM(err error) bool { return err != nil && strings.Contains(err.Error(), "OOM") }
