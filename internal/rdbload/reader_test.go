package rdbload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// enc builds RDB bytes by hand.
type enc []byte

// n appends an RDB length in the smallest form.
func (e enc) n(v uint64) enc {
	switch {
	case v < 1<<6:
		return append(e, byte(v))
	case v < 1<<14:
		return append(e, byte(v>>8)|0x40, byte(v))
	case v <= 0xFFFFFFFF:
		return binary.BigEndian.AppendUint32(append(e, 0x80), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(e, 0x81), v)
}

// s appends a raw string.
func (e enc) s(v string) enc { return append(e.n(uint64(len(v))), v...) }

// b appends bytes as they are.
func (e enc) b(v ...byte) enc { return append(e, v...) }

// ms appends an 8-byte little-endian time.
func (e enc) ms(v uint64) enc { return binary.LittleEndian.AppendUint64(e, v) }

// file wraps body in a header of version v, the EOF opcode and the checksum.
func file(v int, body enc) []byte {
	out := append([]byte(fmt.Sprintf("REDIS%04d", v)), body...)
	out = append(out, opEOF)
	return binary.LittleEndian.AppendUint64(out, rdbstream.CRC64(0, out))
}

// payload is the DUMP payload of a value of type t serialized as value, in an RDB of version v.
func payload(v int, t byte, value []byte) []byte {
	p := append([]byte{t}, value...)
	p = binary.LittleEndian.AppendUint16(p, uint16(v))
	return binary.LittleEndian.AppendUint64(p, rdbstream.CRC64(0, p))
}

// readAll returns every record of data, copied, and the error that ended the reading.
func readAll(data []byte) ([]Record, error) {
	r := NewReader(bytes.NewReader(data))
	var out []Record
	for {
		rec, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out = append(out, Record{Kind: rec.Kind, Key: bytes.Clone(rec.Key), Payload: bytes.Clone(rec.Payload),
			ExpireAtMs: rec.ExpireAtMs, Slot: rec.Slot})
	}
}

// TestValueTypes reads one key of each value type, followed by a string key: the first's
// payload must be exactly its serialized value, framed, and the second must follow it.
func TestValueTypes(t *testing.T) {
	id := bytes.Repeat([]byte{1}, streamIDLen)
	// A stream of one listpack, two groups; the first with a pending entry and a consumer.
	stream := func(t byte) enc {
		e := enc{}.n(1).s(string(id)).s("listpack-bytes").n(3).n(1700000000000).n(2)
		if t >= typeStreamListpacks2 {
			e = e.n(1700000000000).n(0).n(0).n(0).n(3)
		}
		e = e.n(2).s("group-a").n(1700000000000).n(1)
		if t >= typeStreamListpacks2 {
			e = e.n(2)
		}
		e = e.n(1).b(id...).ms(1700000000123).n(4) // the group's PEL: ID, delivery time, count
		e = e.n(1).s("alice").ms(1700000000456)    // one consumer, seen time
		if t >= typeStreamListpacks3 {
			e = e.ms(1700000000789) // active time
		}
		e = e.n(1).b(id...) // the consumer's PEL
		e = e.s("group-b").n(0).n(0)
		if t >= typeStreamListpacks2 {
			e = e.n(0)
		}
		return e.n(0).n(0)
	}
	cases := map[string]struct {
		t     byte
		value enc
	}{
		"string raw":                  {typeString, enc{}.s("hello")},
		"string int8":                 {typeString, enc{}.b(0xC0, 0x85)},
		"string int16":                {typeString, enc{}.b(0xC1, 0x30, 0x75)},
		"string int32":                {typeString, enc{}.b(0xC2, 1, 2, 3, 4)},
		"string LZF":                  {typeString, enc{}.b(0xC3).n(4).n(3).b(2, 'a', 'b', 'c')},
		"string 16 KB (14-bit len)":   {typeString, enc{}.s(strings.Repeat("x", 16000))},
		"string 200 KB (32-bit len)":  {typeString, enc{}.s(strings.Repeat("y", 200_000))},
		"list of strings":             {typeList, enc{}.n(2).s("a").b(0xC0, 7)},
		"set of strings":              {typeSet, enc{}.n(3).s("a").s("b").s("c")},
		"zset, decimal scores":        {typeZSet, enc{}.n(4).s("a").b(3, '1', '.', '5').s("b").b(253).s("c").b(254).s("d").b(255)},
		"zset, binary scores":         {typeZSet2, enc{}.n(2).s("a").ms(1).s("b").ms(2)},
		"hash of strings":             {typeHash, enc{}.n(2).s("f1").s("v1").s("f2").b(0xC0, 1)},
		"hash zipmap":                 {typeHashZipmap, enc{}.s("zipmap")},
		"list ziplist":                {typeListZiplist, enc{}.s("ziplist")},
		"set intset":                  {typeSetIntset, enc{}.s("intset")},
		"zset ziplist":                {typeZSetZiplist, enc{}.s("ziplist")},
		"hash ziplist":                {typeHashZiplist, enc{}.s("ziplist")},
		"list quicklist":              {typeListQuicklist, enc{}.n(2).s("ziplist1").b(0xC3).n(4).n(3).b(2, 'a', 'b', 'c')},
		"hash listpack":               {typeHashListpack, enc{}.s("listpack")},
		"zset listpack":               {typeZSetListpack, enc{}.s("listpack")},
		"list quicklist 2":            {typeListQuicklist2, enc{}.n(2).n(containerPacked).s("listpack").n(containerPlain).s("a plain node")},
		"set listpack (7.2)":          {typeSetListpack, enc{}.s("listpack")},
		"hash listpack ex pre-GA":     {typeHashListpackExPre, enc{}.s("listpack")},
		"hash listpack ex (7.4)":      {typeHashListpackEx, enc{}.ms(1700000000000).s("listpack")},
		"hash metadata pre-GA":        {typeHashMetadataPreGA, enc{}.n(2).n(0).s("f").s("v").n(1700000000000).s("g").s("w")},
		"hash metadata (7.4)":         {typeHashMetadata, enc{}.ms(1700000000000).n(2).n(0).s("f").s("v").n(5).s("g").s("w")},
		"stream listpacks (5.0)":      {typeStreamListpacks, stream(typeStreamListpacks)},
		"stream listpacks 2 (7.0)":    {typeStreamListpacks2, stream(typeStreamListpacks2)},
		"stream listpacks 3 (7.2)":    {typeStreamListpacks3, stream(typeStreamListpacks3)},
		"64-bit length, empty string": {typeString, enc{}.b(0x81, 0, 0, 0, 0, 0, 0, 0, 0)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body := enc{}.b(tc.t).s("k").b(tc.value...).b(typeString).s("next").s("x")
			recs, err := readAll(file(11, body))
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 2 || string(recs[0].Key) != "k" || string(recs[1].Key) != "next" {
				t.Fatalf("records %+v", recs)
			}
			if want := payload(11, tc.t, tc.value); !bytes.Equal(recs[0].Payload, want) {
				t.Fatalf("payload\n%x, want\n%x", recs[0].Payload, want)
			}
			if want := payload(11, typeString, enc{}.s("x")); !bytes.Equal(recs[1].Payload, want) {
				t.Fatalf("the next key's payload %x, want %x", recs[1].Payload, want)
			}
		})
	}
}

// TestOpcodes reads the opcodes around keys: what they set on the records, and what they
// refuse.
func TestOpcodes(t *testing.T) {
	key := func(name string) enc { return enc{}.b(typeString).s(name).s("v") }
	cases := map[string]struct {
		version int
		body    enc
		want    []string // "key@expiry" or "function:code"
		err     error
		errText string
	}{
		"aux, resizedb, selectdb 0, slot info": {
			body: enc{}.b(opAux).s("redis-ver").s("7.4.1").b(opAux).s("aof-base").b(0xC0, 0).
				b(opSelectDB).n(0).b(opResizeDB).n(2).n(1).b(opSlotInfo).n(866).n(2).n(1).b(key("a")...).b(key("b")...),
			want: []string{"a@0", "b@0"},
		},
		"expiry in ms, then none": {
			body: enc{}.b(opExpireTimeMs).ms(1700000000123).b(key("a")...).b(key("b")...),
			want: []string{"a@1700000000123", "b@0"},
		},
		"expiry in seconds": {
			body: enc{}.b(opExpireTime).b(binary.LittleEndian.AppendUint32(nil, 1700000000)...).b(key("a")...),
			want: []string{"a@1700000000000"},
		},
		"idle and freq": {
			body: enc{}.b(opIdle).n(1000).b(key("a")...).b(opFreq, 5).b(key("b")...),
			want: []string{"a@0", "b@0"},
		},
		"a function library, LZF-compressed": {
			body: enc{}.b(opFunction2).b(0xC3).n(4).n(3).b(2, 'l', 'i', 'b').b(key("a")...),
			want: []string{"function:lib", "a@0"},
		},
		"an LZF key with a back reference": {
			// "abcabcabc": a literal "abc", then 6 bytes from 3 back.
			body: enc{}.b(typeString).b(0xC3).n(6).n(9).b(2, 'a', 'b', 'c', 4<<5, 2).s("v"),
			want: []string{"abcabcabc@0"},
		},
		"an empty RDB": {want: nil},
		"a 100 KB key, larger than the read buffer": {
			body: key(strings.Repeat("k", 100_000)), want: []string{strings.Repeat("k", 100_000) + "@0"},
		},
		"database 1": {
			body: enc{}.b(opSelectDB).n(1).b(key("a")...), err: ErrUnsupported, errText: "database 1",
		},
		"module aux data": {
			body: enc{}.b(opModuleAux).n(1), err: ErrUnsupported, errText: "module",
		},
		"a module value": {
			body: enc{}.b(typeModule2).s("k").n(1234), err: ErrUnsupported, errText: "module",
		},
		"pre-GA functions": {
			body: enc{}.b(opFunctionPreGA), err: ErrUnsupported, errText: "release candidates",
		},
		"an unknown type": {
			body: enc{}.b(26).s("k"), err: ErrUnsupported, errText: "value type 26",
		},
		"a bad quicklist container": {
			body: enc{}.b(typeListQuicklist2).s("k").n(1).n(3).s("x"), err: ErrCorrupt, errText: "container 3",
		},
		"a bad length byte": {
			body: enc{}.b(typeString).b(0x82), err: ErrCorrupt, errText: "length byte 0x82",
		},
		"a bad LZF string": {
			body: enc{}.b(typeString).b(0xC3).n(2).n(9).b(2, 'a').s("v"), err: ErrCorrupt, errText: "LZF",
		},
		"version 13": {version: 13, err: ErrUnsupported, errText: "RDB version 13"},
		"version 4":  {version: 4, err: ErrCorrupt, errText: "version 4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			version := tc.version
			if version == 0 {
				version = MaxVersion
			}
			recs, err := readAll(file(version, tc.body))
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("error %v, want %v with %q", err, tc.err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				if r.Kind == KindFunction {
					got = append(got, "function:"+string(r.Payload))
					continue
				}
				got = append(got, fmt.Sprintf("%s@%d", r.Key, r.ExpireAtMs))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("records %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEnd: the checksum is checked (zero means none was written), a cut anywhere is
// ErrCorrupt, and the end is io.EOF for good.
func TestEnd(t *testing.T) {
	data := file(10, enc{}.b(typeString).s("k").s(strings.Repeat("v", 100_000)))
	r := NewReader(bytes.NewReader(data))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("at the end: %v, want io.EOF", err)
		}
	}
	if !r.Checksummed() || r.BytesRead() != int64(len(data)) || r.Version() != 10 {
		t.Fatalf("checksummed %v, %d bytes read of %d, version %d", r.Checksummed(), r.BytesRead(), len(data), r.Version())
	}

	unsummed := bytes.Clone(data)
	clear(unsummed[len(unsummed)-8:])
	if _, err := readAll(unsummed); err != nil {
		t.Fatalf("with rdbchecksum no: %v", err)
	}

	damaged := bytes.Clone(data)
	damaged[len(damaged)/2] ^= 1
	if _, err := readAll(damaged); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "CRC-64") {
		t.Fatalf("a damaged byte: %v, want a CRC-64 mismatch", err)
	}
	if _, err := readAll(append(bytes.Clone(data), 0)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "after the RDB's end") {
		t.Fatalf("a byte after the end: %v, want ErrCorrupt", err)
	}
	late := errors.New("the object's SHA-256 differs")
	r = NewReader(io.MultiReader(bytes.NewReader(data), iotest.ErrReader(late)))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, late) {
		t.Fatalf("an input failing after the RDB's end: %v, want its error", err)
	}
	for _, cut := range []int{0, 5, 9, 10, 12, 50_000, len(data) - 9, len(data) - 1} {
		if _, err := readAll(data[:cut]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d of %d bytes: %v, want ErrCorrupt", cut, len(data), err)
		}
	}
}

// TestKeySlot checks KeySlot against what redis-server 7.0.15 answered to CLUSTER KEYSLOT.
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"": 0, "foo": 12182, "bar": 5061, "key:0": 2592, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "{}": 15257,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
		if got := KeySlot([]byte(key)); got != want {
			t.Errorf("KeySlot([]byte(%q)) = %d, want %d", key, got, want)
		}
	}
}
