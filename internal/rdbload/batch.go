package rdbload

import "strconv"

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

// HeldBytesPerSlot is how many bytes of buffers holding keys Load allows for each slot it
// loads (the slots of Options.Slots, else all 16,384), up to maxHeldBytes a load, so that a
// whole cluster's loads together hold at most 16,384 times this (4 MiB), however many
// masters share the slots. With values of 100 bytes the loader then sends MSETs of about 4
// keys (TestSlotBatcherSendsEverySlotsKeysInOrderWithinItsBudget; 384 bytes gave 5 keys, for
// half as much memory again, and 128 bytes 2.8).
var HeldBytesPerSlot = 256

// maxHeldBytes is the most bytes of buffers holding keys one load allows (a load of every
// slot, into a cluster of one master; a three-master cluster's loads hold 1.3 MiB each), and
// its free buffers at most half of that again.
const maxHeldBytes = 2 << 20

// heldBudget is the bytes of held keys a load of slots slots allows.
func heldBudget(slots int) int { return min(HeldBytesPerSlot*slots, maxHeldBytes) }

// slotBatcher holds small string keys by hash slot and sends each slot's keys as one MSET:
// once a slot holds msetKeys keys; when the bytes held pass budget, the slot that holds the
// most; on flush, one slot before any other command for it (so the node gets each slot's
// commands in the RDB's order); and every slot at the end.
//
// A slot's keys are held as the MSET's arguments already encoded, back to back in one
// buffer: sending them is one copy of bytes read in order (a list of keys held apart cost
// the loader a cache miss or more per key when it sent them, more than the whole SET did).
// The buffers come from free lists by size (heldClasses), so what the batcher allocates
// follows the bytes it holds, not the keys it has seen: at most the budget in buffers
// holding keys, half of it in free ones.
type slotBatcher struct {
	send   func(keys int, args []byte) error
	budget int
	held   int // the capacity of the buffers holding keys
	// index is each slot's place in slots plus one (0: none yet); slots grows as new slots
	// come, to the number of slots loaded at most.
	index []int32
	slots []heldSlot
	// holding[n] counts the slots holding n keys, 0 < n < msetKeys; sweep is where the
	// search for one of the fullest goes on, round the slots. (A list of the slots of each
	// count, kept as keys came, cost the loader a cache miss or two a key.)
	holding [msetKeys]int
	sweep   int
	// free holds buffers sent, by size, for the next keys: freeBytes of them, at most half
	// the budget.
	free      [len(heldClasses)][][]byte
	freeBytes int
}

// heldSlot is the keys held for one slot, in the order they came, encoded.
type heldSlot struct {
	args []byte
	n    int
}

// heldClasses are the capacities of the buffers slots hold their keys in: a slot's keys
// move to the next size up as they outgrow one, at most msetKeys keys of maxHeldString.
var heldClasses = [...]int{64, 128, 256, 512, 1 << 10, 2 << 10, 4 << 10, 9 << 10}

// newSlotBatcher returns a batcher that holds at most budget bytes and sends with send the
// number of keys and their MSET arguments (key, value, ... as RESP bulk strings), valid only
// during the call.
func newSlotBatcher(budget int, send func(keys int, args []byte) error) *slotBatcher {
	return &slotBatcher{send: send, budget: budget, index: make([]int32, Slots)}
}

// add holds key and value for slot, sending what the rules above say is due.
func (b *slotBatcher) add(slot int, key, value []byte) error {
	at := int(b.index[slot]) - 1
	if at < 0 {
		b.slots = append(b.slots, heldSlot{})
		at = len(b.slots) - 1
		b.index[slot] = int32(at + 1)
	}
	s := &b.slots[at]
	if s.n > 0 {
		b.holding[s.n]--
	}
	if need := len(s.args) + bulkLen(len(key)) + bulkLen(len(value)); need > cap(s.args) {
		b.held -= cap(s.args)
		s.args = b.grow(s.args, need)
		b.held += cap(s.args)
	}
	s.args = appendBulk(appendBulk(s.args, key), value)
	s.n++
	if s.n == msetKeys {
		return b.emit(at)
	}
	b.holding[s.n]++
	for b.held > b.budget {
		if err := b.emitFullest(); err != nil {
			return err
		}
	}
	return nil
}

// bulkLen is the length of a RESP bulk string of n bytes: $n\r\n, the bytes, \r\n.
func bulkLen(n int) int {
	digits := 1
	for v := n; v >= 10; v /= 10 {
		digits++
	}
	return 1 + digits + 2 + n + 2
}

// appendBulk appends b as a RESP bulk string.
func appendBulk(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

// grow returns a buffer from the free lists of at least need bytes holding old's bytes,
// and puts old back.
func (b *slotBatcher) grow(old []byte, need int) []byte {
	c := 0
	for c < len(heldClasses)-1 && heldClasses[c] < need {
		c++
	}
	var buf []byte
	if l := b.free[c]; len(l) > 0 {
		buf, b.free[c] = l[len(l)-1][:0], l[:len(l)-1]
		b.freeBytes -= cap(buf)
	} else {
		buf = make([]byte, 0, max(heldClasses[c], need))
	}
	buf = append(buf, old...)
	b.release(old)
	return buf
}

// release puts a buffer back on the free list of its size, unless the free lists hold half
// the budget already (then the garbage collector takes it).
func (b *slotBatcher) release(buf []byte) {
	if b.freeBytes+cap(buf) > b.budget/2 {
		return
	}
	for c, size := range heldClasses {
		if cap(buf) == size {
			b.free[c] = append(b.free[c], buf)
			b.freeBytes += size
			return
		}
	}
}

// flush sends the keys held for slot, if any, as one MSET.
func (b *slotBatcher) flush(slot int) error {
	at := int(b.index[slot]) - 1
	if at < 0 || b.slots[at].n == 0 {
		return nil
	}
	b.holding[b.slots[at].n]--
	return b.emit(at)
}

// emit sends the keys held at place at, no longer counted in holding, and frees their
// buffer.
func (b *slotBatcher) emit(at int) error {
	s := &b.slots[at]
	b.held -= cap(s.args)
	err := b.send(s.n, s.args)
	b.release(s.args)
	*s = heldSlot{}
	return err
}

// flushAll sends every slot's keys, the fullest first.
func (b *slotBatcher) flushAll() error {
	for b.held > 0 {
		if err := b.emitFullest(); err != nil {
			return err
		}
	}
	return nil
}

// emitFullest sends the keys of a slot holding the most, or one fewer (found sooner, in a
// sweep that reads the slots in order); called only while some slot holds keys.
func (b *slotBatcher) emitFullest() error {
	most := msetKeys - 1
	for b.holding[most] == 0 {
		most--
	}
	enough := max(1, most-1)
	for {
		at := b.sweep
		if b.sweep++; b.sweep == len(b.slots) {
			b.sweep = 0
		}
		if n := b.slots[at].n; n >= enough {
			b.holding[n]--
			return b.emit(at)
		}
	}
}
