package rdbload

// MSET batches. A small SET costs a node mostly for being a command: reading and dispatching
// it, the cluster's slot check, replicating it to every replica and appending it to the AOF.
// MSET of several keys pays that once (redis-server 7.0.15, a master and its replica with
// the AOF on, 333,333 keys of 100 bytes through redis-cli --pipe: 1.10-1.20 CPU-s on the
// master and 0.87-1.03 on the replica as SETs, 0.73-0.75 and 0.58-0.61 as MSETs of 8). In a
// cluster the keys of one MSET must share a hash slot, and an RDB lists its keys in hash
// order, not by slot, so the loader holds small strings by slot (slotBatcher) and sends a
// slot's keys together.

// msetKeys is the most keys one MSET carries: past 8, the node's CPU per key hardly falls.
const msetKeys = 8

// maxHeldString is the largest key and value, together, that Load holds for an MSET; a
// larger string goes as its own SET, whose cost is in its bytes more than in its command.
const maxHeldString = 1 << 10

// heldOverhead is what the loader counts for a held key beside its bytes: the entry that
// chains it.
const heldOverhead = 64

// HeldBytesPerSlot is how many bytes of held keys Load allows for each slot it loads (the
// slots of Options.Slots, else all 16,384), up to maxHeldBytes a load, so that a whole
// cluster's loads together hold at most 16,384 times this (6 MiB), however many masters share
// the slots. With values of 100 bytes that is about 2 keys a slot, and the loader then sends
// MSETs of about 5 keys.
var HeldBytesPerSlot = 384

// maxHeldBytes is the most bytes of held keys one load allows: a load of every slot (one
// master) holds about 2 MiB of keys, as each of a three-master cluster's loads does.
const maxHeldBytes = 2 << 20

// heldBudget is the bytes of held keys a load of slots slots allows.
func heldBudget(slots int) int { return min(HeldBytesPerSlot*slots, maxHeldBytes) }

// slotBatcher holds small string keys by hash slot and sends each slot's keys as one MSET:
// once a slot holds msetKeys keys; when the bytes held would pass budget, the slot that
// holds the most; on flush, one slot before any other command for it (so the node gets each
// slot's commands in the RDB's order); and every slot at the end. What the send function is
// given is valid only during the call.
type slotBatcher struct {
	send   func(keys, values [][]byte) error
	budget int
	held   int
	slots  []heldSlot
	// levels[n] lists the slots holding n keys, 0 < n < msetKeys; heldSlot.at is a slot's
	// place in its level, so moving it is O(1) and the fullest slot is found at once.
	levels       [msetKeys][]int32
	free         *heldKey // entries sent, kept for the next keys with their buffers
	keys, values [][]byte
}

// heldSlot is the keys held for one slot, in the order they came.
type heldSlot struct {
	first, last *heldKey
	n, at       int32
}

// heldKey is one held key and its value, back to back in kv.
type heldKey struct {
	next *heldKey
	kv   []byte
	klen int
}

// newSlotBatcher returns a batcher that holds at most budget bytes and sends with send.
func newSlotBatcher(budget int, send func(keys, values [][]byte) error) *slotBatcher {
	return &slotBatcher{send: send, budget: budget, slots: make([]heldSlot, Slots)}
}

// add holds key and value for slot, sending what the rules above say is due.
func (b *slotBatcher) add(slot int, key, value []byte) error {
	s := &b.slots[slot]
	b.leave(slot)
	h := b.free
	if h != nil {
		b.free = h.next
	} else {
		h = &heldKey{}
	}
	h.next, h.klen = nil, len(key)
	h.kv = append(append(h.kv[:0], key...), value...)
	if s.last == nil {
		s.first = h
	} else {
		s.last.next = h
	}
	s.last = h
	s.n++
	b.held += len(h.kv) + heldOverhead
	if s.n == msetKeys {
		return b.emit(slot)
	}
	b.enter(slot)
	for b.held > b.budget {
		if err := b.flush(b.fullest()); err != nil {
			return err
		}
	}
	return nil
}

// flush sends the keys held for slot, if any, as one MSET.
func (b *slotBatcher) flush(slot int) error {
	if b.slots[slot].n == 0 {
		return nil
	}
	b.leave(slot)
	return b.emit(slot)
}

// emit sends the keys held for slot, out of the levels already, and frees their entries.
func (b *slotBatcher) emit(slot int) error {
	s := &b.slots[slot]
	b.keys, b.values = b.keys[:0], b.values[:0]
	for h := s.first; h != nil; h = h.next {
		b.keys = append(b.keys, h.kv[:h.klen])
		b.values = append(b.values, h.kv[h.klen:])
		b.held -= len(h.kv) + heldOverhead
	}
	err := b.send(b.keys, b.values)
	s.last.next, b.free = b.free, s.first
	*s = heldSlot{}
	return err
}

// flushAll sends every slot's keys, the fullest first.
func (b *slotBatcher) flushAll() error {
	for b.held > 0 {
		if err := b.flush(b.fullest()); err != nil {
			return err
		}
	}
	return nil
}

// fullest is a slot holding the most keys; called only while some slot holds keys.
func (b *slotBatcher) fullest() int {
	for n := msetKeys - 1; ; n-- {
		if l := b.levels[n]; len(l) > 0 {
			return int(l[len(l)-1])
		}
	}
}

// leave takes slot out of its level.
func (b *slotBatcher) leave(slot int) {
	s := &b.slots[slot]
	if s.n == 0 {
		return
	}
	l := b.levels[s.n]
	last := l[len(l)-1]
	l[s.at] = last
	b.slots[last].at = s.at
	b.levels[s.n] = l[:len(l)-1]
}

// enter puts slot into the level of its count.
func (b *slotBatcher) enter(slot int) {
	s := &b.slots[slot]
	s.at = int32(len(b.levels[s.n]))
	b.levels[s.n] = append(b.levels[s.n], int32(slot))
}
