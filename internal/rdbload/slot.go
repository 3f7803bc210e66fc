package rdbload

import (
	"bytes"
	"fmt"
	"math/bits"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// crc16Table is the table of CRC-16/XMODEM (polynomial 0x1021), the hash of Redis Cluster.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// KeySlot is the hash slot of key, as Redis Cluster computes it: CRC-16 (XMODEM) of the key,
// or of its hash tag (the part between the first { and the next }, when not empty), modulo
// 16384.
func KeySlot[K string | []byte](key K) int {
	k := []byte(key)
	if i := bytes.IndexByte(k, '{'); i >= 0 {
		if j := bytes.IndexByte(k[i+1:], '}'); j > 0 {
			k = k[i+1 : i+1+j]
		}
	}
	var crc uint16
	for _, b := range k {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b]
	}
	return int(crc) % Slots
}

// SlotRange is the slots From to To, both included.
type SlotRange struct{ From, To int }

// slotSet is a set of slots.
type slotSet [Slots / 64]uint64

// newSlotSet returns the set of the ranges' slots, or an error naming a range out of 0-16383
// or reversed.
func newSlotSet(ranges []SlotRange) (*slotSet, error) {
	var set slotSet
	for _, r := range ranges {
		if r.From < 0 || r.To >= Slots || r.From > r.To {
			return nil, fmt.Errorf("slot range %d-%d: want 0 <= from <= to <= %d", r.From, r.To, Slots-1)
		}
		for s := r.From; s <= r.To; s++ {
			set[s/64] |= 1 << (s % 64)
		}
	}
	return &set, nil
}

func (s *slotSet) has(slot int) bool { return s[slot/64]&(1<<(slot%64)) != 0 }

// count is the number of slots in the set; a nil set stands for all of them.
func (s *slotSet) count() int {
	if s == nil {
		return Slots
	}
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}
