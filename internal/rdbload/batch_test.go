package rdbload

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestSlotBatcher feeds a batcher 100,000 keys of 100-byte values in random slots of a
// third of the cluster (a master's share), with a flush of a random slot after every 50th
// key (a key sent on its own, which its slot's held keys must precede), and checks what it
// sends: every key once, each MSET of one slot and at most msetKeys keys, each slot's keys in
// the order they came, never more bytes held than the budget, and MSETs of about 4 keys on
// average with the default budget.
func TestSlotBatcherSendsEverySlotsKeysInOrderWithinItsBudget(t *testing.T) {
	const keys, slots = 100_000, Slots / 3
	value := make([]byte, 100)
	budget := HeldBytesPerSlot * slots
	slotOf := map[string]int{}
	sentOrder := map[int][]string{}
	var batches int
	b := newSlotBatcher(budget, func(n int, args []byte) error {
		batches++
		ks, vs := splitBulks(t, args)
		if n == 0 || n > msetKeys || len(ks) != n || len(vs) != n {
			t.Fatalf("an MSET of %d keys with %d keys and %d values", n, len(ks), len(vs))
		}
		slot := slotOf[string(ks[0])]
		for i, k := range ks {
			if slotOf[string(k)] != slot {
				t.Fatalf("one MSET holds %s (slot %d) and %s (slot %d)", ks[0], slot, k, slotOf[string(k)])
			}
			if len(vs[i]) != len(value) {
				t.Fatalf("%s sent with a %d-byte value", k, len(vs[i]))
			}
			sentOrder[slot] = append(sentOrder[slot], string(k))
		}
		return nil
	})
	rng := rand.New(rand.NewPCG(3, 4))
	cameOrder := map[int][]string{}
	for i := range keys {
		key := fmt.Sprintf("key:%08d", i)
		slot := rng.IntN(slots)
		slotOf[key] = slot
		cameOrder[slot] = append(cameOrder[slot], key)
		if err := b.add(slot, []byte(key), value); err != nil {
			t.Fatal(err)
		}
		if b.held > budget {
			t.Fatalf("after key %d: %d bytes held, the budget is %d", i, b.held, budget)
		}
		if i%50 == 49 {
			s := rng.IntN(slots)
			if err := b.flush(s); err != nil {
				t.Fatal(err)
			}
			if at := b.index[s] - 1; at >= 0 && b.slots[at].n != 0 {
				t.Fatalf("slot %d holds %d keys after its flush", s, b.slots[at].n)
			}
		}
	}
	if err := b.flushAll(); err != nil {
		t.Fatal(err)
	}
	if b.held != 0 {
		t.Fatalf("%d bytes held after flushAll", b.held)
	}
	sent := 0
	for slot, came := range cameOrder {
		if !slices.Equal(sentOrder[slot], came) {
			t.Fatalf("slot %d: sent %d keys %v..., they came as %d keys %v...", slot, len(sentOrder[slot]),
				sentOrder[slot][:min(3, len(sentOrder[slot]))], len(came), came[:min(3, len(came))])
		}
		sent += len(came)
	}
	if sent != keys {
		t.Fatalf("sent %d keys, want %d", sent, keys)
	}
	mean := float64(keys) / float64(batches)
	t.Logf("%d MSETs, %.2f keys each on average", batches, mean)
	if mean < 3.5 {
		t.Fatalf("MSETs of %.2f keys on average, want at least 3.5 with %d bytes a slot", mean, HeldBytesPerSlot)
	}
}

// splitBulks splits RESP bulk strings into the even ones (keys) and the odd ones (values).
func splitBulks(t *testing.T, args []byte) (keys, values [][]byte) {
	t.Helper()
	for i := 0; len(args) > 0; i++ {
		end := bytes.Index(args, []byte("\r\n"))
		n, err := strconv.Atoi(string(args[1:max(1, end)]))
		if args[0] != '$' || end < 0 || err != nil || len(args) < end+2+n+2 || string(args[end+2+n:end+4+n]) != "\r\n" {
			t.Fatalf("not RESP bulk strings: %q", args[:min(len(args), 40)])
		}
		arg := args[end+2 : end+2+n]
		if i%2 == 0 {
			keys = append(keys, arg)
		} else {
			values = append(values, arg)
		}
		args = args[end+4+n:]
	}
	return keys, values
}
