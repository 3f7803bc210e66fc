package rdbstream

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// rdbOf returns a well-framed RDB (version 10, Redis 7.0) with body between the header and
// the EOF opcode, checksummed unless zeroSum.
func rdbOf(body []byte, zeroSum bool) []byte {
	b := append([]byte("REDIS0010"), body...)
	b = append(b, opEOF)
	var sum [8]byte
	if !zeroSum {
		binary.LittleEndian.PutUint64(sum[:], CRC64(0, b))
	}
	return append(b, sum[:]...)
}

func TestCRC64JonesMatchesRedis(t *testing.T) {
	// The check value of Redis's crc64.c test ("123456789").
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64(123456789) = %016x, want e9c6d914c4b8d9ca", got)
	}
	// Continuing in pieces gives the same value as at once.
	data := []byte(strings.Repeat("redis backup ", 1000))
	if a, b := CRC64(CRC64(0, data[:777]), data[777:]), CRC64(0, data); a != b {
		t.Fatalf("in pieces %016x, at once %016x", a, b)
	}
}

// TestCRC64MatchesHashCRC64 checks the eight-bytes-at-a-time loop against hash/crc64 with
// the same table, for every length up to 4 KiB and from every start within a word.
func TestCRC64MatchesHashCRC64(t *testing.T) {
	data := make([]byte, 4096+8)
	for i := range data {
		data[i] = byte(i*131 + i>>8*7)
	}
	for start := range 8 {
		for n := 0; n+start <= len(data); n += 1 + n/64 {
			p := data[start : start+n]
			if got, want := CRC64(0x1234, p), ^crc64.Update(^uint64(0x1234), jones, p); got != want {
				t.Fatalf("CRC64 of %d bytes from %d = %016x, hash/crc64 says %016x", n, start, got, want)
			}
		}
	}
}

// BenchmarkCRC64 is the CRC of a 32 KiB write (the backup's) and of a 120-byte record (the
// restore's DUMP payload of one key), against hash/crc64 with the same table.
func BenchmarkCRC64(b *testing.B) {
	for _, size := range []int{120, 32 << 10} {
		p := make([]byte, size)
		b.Run(fmt.Sprintf("size=%d/ours", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			var sum uint64
			for b.Loop() {
				sum = CRC64(sum, p)
			}
		})
		b.Run(fmt.Sprintf("size=%d/hash-crc64", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			var sum uint64
			for b.Loop() {
				sum = ^crc64.Update(^sum, jones, p)
			}
		})
	}
}

func TestParseHeader(t *testing.T) {
	cases := map[string]struct {
		head    string
		version int
		err     string
	}{
		"Redis 7.0":    {head: "REDIS0010", version: 10},
		"Redis 7.4":    {head: "REDIS0012", version: 12},
		"Redis 2.6":    {head: "REDIS0006", version: 6},
		"too old":      {head: "REDIS0004", err: "older than Redis 2.6"},
		"not Redis":    {head: "PK\x03\x04abcde", err: "not REDIS"},
		"bad version":  {head: "REDIS00x1", err: "not a number"},
		"an AOF":       {head: "*2\r\n$6\r\nSE", err: "not REDIS"},
		"lower magic?": {head: "redis0010", err: "not REDIS"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := ParseHeader([]byte(tc.head))
			if tc.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want ErrInvalid with %q", err, tc.err)
				}
				return
			}
			if err != nil || v != tc.version {
				t.Fatalf("got %d, %v; want %d", v, err, tc.version)
			}
		})
	}
}

// TestChecker writes RDBs through the checker in every chunking, from one byte at a time to
// all at once, and checks what it says of them.
func TestChecker(t *testing.T) {
	body := make([]byte, 5000)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(body)
	good := rdbOf(body, false)
	flipped := bytes.Clone(good)
	flipped[2000] ^= 1
	cut := good[:3000]
	cases := map[string]struct {
		rdb         []byte
		checksummed bool
		err         string
	}{
		"whole":                  {rdb: good, checksummed: true},
		"empty database":         {rdb: rdbOf(nil, false), checksummed: true},
		"rdbchecksum no":         {rdb: rdbOf(body, true)},
		"a flipped bit":          {rdb: flipped, err: "CRC-64"},
		"cut short":              {rdb: cut, err: "no EOF opcode"},
		"too short to be an RDB": {rdb: good[:12], err: "fewer than the 18"},
		"a wrong checksum":       {rdb: append(bytes.Clone(good[:len(good)-8]), 1, 2, 3, 4, 5, 6, 7, 8), err: "CRC-64"},
	}
	for name, tc := range cases {
		for _, chunk := range []int{1, 3, 7, 8, 9, 64, 4096, len(tc.rdb)} {
			var out bytes.Buffer
			c := newChecker(&out)
			for rest := tc.rdb; len(rest) > 0; {
				n := min(chunk, len(rest))
				if _, err := c.Write(rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			checksummed, err := c.finish()
			if tc.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s in chunks of %d: error %v, want ErrInvalid with %q", name, chunk, err, tc.err)
				}
				continue
			}
			sum := sha256.Sum256(tc.rdb)
			if err != nil || checksummed != tc.checksummed || c.n != int64(len(tc.rdb)) || c.sum() != hex.EncodeToString(sum[:]) ||
				!bytes.Equal(out.Bytes(), tc.rdb) {
				t.Fatalf("%s in chunks of %d: checksummed=%v err=%v n=%d", name, chunk, checksummed, err, c.n)
			}
		}
	}
}

func TestCheckerHeader(t *testing.T) {
	c := newChecker(io.Discard)
	if err := c.header(bufio.NewReader(strings.NewReader("REDIS0011rest"))); err != nil || c.version != 11 {
		t.Fatalf("version %d, %v", c.version, err)
	}
	if err := c.header(bufio.NewReader(strings.NewReader("REDI"))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a 4-byte payload: %v, want ErrInvalid", err)
	}
}

func TestMarkReader(t *testing.T) {
	mark := []byte(strings.Repeat("0123456789", 4))
	payload := make([]byte, 200_000)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(payload)
	stream := append(bytes.Clone(payload), mark...)
	readers := map[string]func(io.Reader) io.Reader{
		"as it comes":      func(r io.Reader) io.Reader { return r },
		"one byte a read":  iotest.OneByteReader,
		"half of each":     iotest.HalfReader,
		"data with EOF":    iotest.DataErrReader,
		"buffered by 4096": func(r io.Reader) io.Reader { return bufio.NewReaderSize(r, 4096) },
	}
	read := func(r io.Reader, dst []byte) ([]byte, error) {
		m := &markReader{r: r, mark: mark, buf: make([]byte, 1000+eofMarkLen)}
		var out bytes.Buffer
		buf := dst
		for {
			n, err := m.Read(buf)
			out.Write(buf[:n])
			if errors.Is(err, io.EOF) {
				return out.Bytes(), nil
			}
			if err != nil {
				return out.Bytes(), err
			}
		}
	}
	for name, wrap := range readers {
		for _, size := range []int{1, 7, 4096} {
			got, err := read(wrap(bytes.NewReader(stream)), make([]byte, size))
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%s, reads of %d: %d bytes (%v), want the %d before the mark", name, size, len(got), err, len(payload))
			}
		}
	}
	t.Run("the connection ends before the mark", func(t *testing.T) {
		_, err := read(bytes.NewReader(stream[:len(stream)-1]), make([]byte, 100))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "before the end mark") {
			t.Fatalf("error %v, want ErrInvalid", err)
		}
	})
	t.Run("a payload shorter than the mark", func(t *testing.T) {
		got, err := read(iotest.OneByteReader(bytes.NewReader(append([]byte("abc"), mark...))), make([]byte, 100))
		if err != nil || string(got) != "abc" {
			t.Fatalf("read %q, %v", got, err)
		}
	})
}

func TestReadPreamble(t *testing.T) {
	aux := "\xfa\x09redis-ver\x057.2.4\xfa\x0aredis-bits\xc0\x40\xfa\x08aof-base\xc0\x00"
	cases := map[string]struct {
		body          string
		keys, expires int64
		aux           map[string]string
	}{
		"database 0 with keys": {body: aux + "\xfe\x00\xfb\x42\x00\x0a\x00\x01k\x01v", keys: 0x200, expires: 10,
			aux: map[string]string{"redis-ver": "7.2.4", "redis-bits": "64", "aof-base": "0"}},
		"a 32-bit count": {body: "\xfe\x00\xfb\x80\x00\x10\x00\x00\x00", keys: 1 << 20, expires: 0},
		"a 64-bit count": {body: "\xfe\x00\xfb\x81\x00\x00\x00\x01\x00\x00\x00\x00\x05", keys: 1 << 32, expires: 5},
		"empty":          {body: aux + "\xff", keys: 0, expires: 0},
		"functions first": {body: "\xf5\x0dlibrary code!\xf5\xc3\x05\x0aabcde\xfe\x00\xfb\x03\x01",
			keys: 3, expires: 1},
		"database 1 first":    {body: "\xfe\x01\xfb\x03\x01", keys: -1, expires: -1},
		"module data":         {body: "\xf7\x00\x00\x00", keys: -1, expires: -1},
		"no RESIZEDB":         {body: "\xfe\x00\x00\x01k\x01v", keys: -1, expires: -1},
		"cut in an aux field": {body: "\xfa\x09redis-v", keys: -1, expires: -1},
		"a long aux field":    {body: "\xfa\x01x\x50\x01" + strings.Repeat("y", 0x1001) + "\xff", keys: 0, expires: 0, aux: map[string]string{"x": ""}},
		"int16 and int32 aux": {body: "\xfa\x01a\xc1\xff\xff\xfa\x01b\xc2\x00\xf1\x53\x65\xff", keys: 0, expires: 0,
			aux: map[string]string{"a": "-1", "b": "1700000000"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := readPreamble(bufio.NewReader(strings.NewReader(tc.body)))
			if p.keys != tc.keys || p.expires != tc.expires {
				t.Fatalf("keys %d expires %d, want %d and %d", p.keys, p.expires, tc.keys, tc.expires)
			}
			for k, v := range tc.aux {
				if p.aux[k] != v {
					t.Errorf("aux %s = %q, want %q (all: %v)", k, p.aux[k], v, p.aux)
				}
			}
		})
	}
}
