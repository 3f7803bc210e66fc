package redisarchive

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// TestReadRepliesNamesAForeignSlot: a MOVED reply to a replayed command is a
// ForeignSlotError with the command's offset and the slot; another error reply stays a
// plain refusal; OK replies are no error.
func TestReadRepliesNamesAForeignSlot(t *testing.T) {
	for _, c := range []struct {
		name, replies string
		offsets       []int64
		slot          int
		offset        int64
		refused       string // a plain refusal's text, "" for none
	}{
		{name: "all answered", replies: "+OK\r\n:1\r\n", offsets: []int64{10, 20}},
		{name: "moved", replies: "+OK\r\n-MOVED 14 127.1.0.14:6379\r\n", offsets: []int64{10, 20}, slot: 14, offset: 20},
		{name: "another error", replies: "-ERR wrong number of arguments\r\n", offsets: []int64{10}, refused: "ERR wrong number"},
		{name: "not a slot", replies: "-MOVED x 127.1.0.14:6379\r\n", offsets: []int64{10}, refused: "MOVED x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := make(chan int64, len(c.offsets))
			for _, o := range c.offsets {
				in <- o
			}
			close(in)
			err := readReplies(bufio.NewReader(strings.NewReader(c.replies)), in)
			var foreign *ForeignSlotError
			switch {
			case c.slot > 0:
				if !errors.As(err, &foreign) || foreign.Slot != c.slot || foreign.Offset != c.offset {
					t.Fatalf("got %v, want slot %d at offset %d", err, c.slot, c.offset)
				}
			case c.refused != "":
				if err == nil || errors.As(err, &foreign) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("got %v, want a refusal naming %q", err, c.refused)
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}
