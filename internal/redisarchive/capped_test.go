package redisarchive

import (
	"errors"
	"testing"
)

// TestCappedBufferRefusesPastItsMax: StoreSink.Get's buffer takes objects up to its max and
// refuses a write that would take it past it, so a hostile object cannot fill the
// operator's memory.
func TestCappedBufferRefusesPastItsMax(t *testing.T) {
	b := &cappedBuffer{max: 10}
	if _, err := b.Write(make([]byte, 10)); err != nil {
		t.Fatalf("10 bytes into a 10-byte cap: %v", err)
	}
	if _, err := b.Write([]byte{1}); !errors.Is(err, ErrObjectTooLarge) {
		t.Errorf("the 11th byte: %v, want ErrObjectTooLarge", err)
	}
	if b.Len() != 10 {
		t.Errorf("%d bytes kept, want 10", b.Len())
	}
}
