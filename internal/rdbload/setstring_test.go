package rdbload

import (
	"bytes"
	"testing"
)

// TestPlainString reads the string of each encoding out of a DUMP payload, and refuses what
// must stay a RESTORE: another type, an LZF string over maxSetLZF, a payload that does not
// parse.
func TestPlainString(t *testing.T) {
	trailer := bytes.Repeat([]byte{0xEE}, trailerLen)                                                     // version and CRC-64: not read
	lzfBig := append([]byte{typeString, 0xC3, 0x43, 0xE8, 0x80, 0, 1, 0x11, 0x70}, make([]byte, 1000)...) // 1,000 compressed, 70,000 claimed
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
		ok      bool
	}{
		{"as is", []byte{typeString, 0x01, 'v'}, "v", true},
		{"empty", []byte{typeString, 0x00}, "", true},
		{"int8", []byte{typeString, 0xC0, 0xF4}, "-12", true},
		{"int16", []byte{typeString, 0xC1, 0x30, 0x75}, "30000", true},
		{"int32", []byte{typeString, 0xC2, 0x00, 0x6C, 0xCA, 0x88}, "-2000000000", true},
		{"LZF", []byte{typeString, 0xC3, 0x04, 0x03, 0x02, 'a', 'b', 'c'}, "abc", true},
		{"LZF over maxSetLZF", lzfBig, "", false},
		{"LZF with bytes after its block", []byte{typeString, 0xC3, 0x04, 0x03, 0x02, 'a', 'b', 'c', 'd'}, "", false},
		{"LZF shorter than it claims", []byte{typeString, 0xC3, 0x04, 0x05, 0x02, 'a', 'b', 'c'}, "", false},
		{"length past the value", []byte{typeString, 0x05, 'v'}, "", false},
		{"int8 with a byte after it", []byte{typeString, 0xC0, 0xF4, 0x00}, "", false},
		{"unknown encoding", []byte{typeString, 0xC4}, "", false},
		{"a list", []byte{typeListQuicklist2, 0x01}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := stringReader{scratch: []byte("left over")}
			got, ok := sr.plainString(append(tc.payload, trailer...))
			if ok != tc.ok || string(got) != tc.want {
				t.Fatalf("plainString = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, ok := new(stringReader).plainString(trailer[:trailerLen]); ok {
		t.Fatal("a payload of only a trailer was taken for a string")
	}
}
