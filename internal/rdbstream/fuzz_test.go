package rdbstream

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/fuzzcorpus"
)

// fetchBound is the most a fetch may allocate for n bytes of a node's answers: its buffers
// (the connection's and the payload's, the end mark's, drain's) and the aux fields it keeps,
// whatever lengths the answers claim.
func fetchBound(n int) uint64 { return 1<<20 + 4*uint64(n) }

// FuzzFetch plays a node whose every answer to Fetch's exchange (REPLCONF, PSYNC, then the
// payload framed as $<length> or $EOF:<mark>) is the input: the fetch must never panic,
// allocate no more than fetchBound of the input, fail with an error matching ErrInvalid,
// ErrProtocol, ErrAuth, ErrRefused or io.ErrUnexpectedEOF, and succeed only with a whole RDB
// written: its bytes counted and hashed as Result says, with a matching CRC-64 when it
// claims one. The seed corpus (testdata/fuzz/FuzzFetch, written by TestWriteFuzzSeeds) holds
// both framings around real and crafted RDBs, huge length claims, and refusals.
func FuzzFetch(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		s := &session{addr: "fuzz", r: bufio.NewReaderSize(bytes.NewReader(data), 64<<10), w: io.Discard}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res, err := s.fetch(&out)
		runtime.ReadMemStats(&after)
		// out grows with what is written: not the fetch's own memory.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > fetchBound(len(data))+3*uint64(out.Cap()) {
			t.Fatalf("%d bytes of answers allocated %d bytes (error: %v)", len(data), alloc, err)
		}
		if err != nil {
			for _, cause := range []error{ErrInvalid, ErrProtocol, ErrAuth, ErrRefused, io.ErrUnexpectedEOF} {
				if errors.Is(err, cause) {
					return
				}
			}
			t.Fatalf("an error that names no cause: %v", err)
		}
		rdb := out.Bytes()
		sum := sha256.Sum256(rdb)
		if res.Bytes != int64(len(rdb)) || res.SHA256 != hex.EncodeToString(sum[:]) || len(rdb) < minRDBLen || string(rdb[:5]) != "REDIS" {
			t.Fatalf("%+v for %d bytes written", res, len(rdb))
		}
		stored := binary.LittleEndian.Uint64(rdb[len(rdb)-8:])
		if res.Checksummed != (stored != 0) || res.Checksummed && stored != CRC64(0, rdb[:len(rdb)-8]) || rdb[len(rdb)-9] != opEOF {
			t.Fatalf("%+v: the RDB's end does not check", res)
		}
	})
}

// TestWriteFuzzSeeds writes FuzzFetch's seed corpus, testdata/fuzz/FuzzFetch, when
// MWO_RDBSTREAM_FUZZSEEDS=1, from the RDBs of ../rdbload/testdata and crafted ones.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("MWO_RDBSTREAM_FUZZSEEDS") != "1" {
		t.Skip("MWO_RDBSTREAM_FUZZSEEDS=1 writes the fuzz seed corpus")
	}
	real, err := os.ReadFile(filepath.Join("..", "rdbload", "testdata", "redis-7.4.1.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	small := rdbOf([]byte("\xfa\x09redis-ver\x057.2.4\xfa\x05ctime\xc2\x00\xf1\x53\x65\xfe\x00\xfb\x01\x00\x00\x01k\x01v"), false)
	manyAux := rdbOf([]byte(strings.Repeat("\xfa\x01a\x01b", 1000)), false)
	const replies = "+OK\r\n+OK\r\n\n\n+FULLRESYNC 0123456789012345678901234567890123456789 4242\r\n"
	mark := strings.Repeat("m", eofMarkLen)
	disk := func(rdb []byte) []byte { return []byte(replies + "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)) }
	diskless := func(rdb []byte) []byte { return []byte(replies + "$EOF:" + mark + "\r\n" + string(rdb) + mark) }
	seeds := map[string][]byte{
		"disk-real":          disk(real),
		"diskless-real":      diskless(real),
		"disk-small":         disk(small),
		"diskless-small":     diskless(small),
		"no-checksum":        disk(rdbOf([]byte("\x00\x01k\x01v"), true)),
		"many-aux":           disk(manyAux),
		"length-claim-huge":  []byte(replies + "$9223372036854775807\r\n" + string(small)),
		"length-claim-short": disk(small)[:len(disk(small))-5],
		"aux-claim-4GiB":     disk(rdbOf([]byte("\xfa\x80\xff\xff\xff\xff"), false)),
		"aux-lzf-claim-4GiB": disk(rdbOf([]byte("\xfa\x01a\xc3\x80\xff\xff\xff\xff\x80\xff\xff\xff\xff"), false)),
		"resizedb-2^62":      disk(rdbOf([]byte("\xfe\x00\xfb\x81\x40\x00\x00\x00\x00\x00\x00\x00\x81\x40\x00\x00\x00\x00\x00\x00\x00"), false)),
		"diskless-no-mark":   []byte(replies + "$EOF:" + mark + "\r\n" + string(small)),
		"bad-mark":           []byte(replies + "$EOF:short\r\n"),
		"refused":            []byte("+OK\r\n+OK\r\n-NOMASTERLINK Can't SYNC while not connected with my master\r\n"),
		"noperm":             []byte("-NOPERM this user has no permissions to run the 'replconf' command\r\n"),
		"unknown-rdb-only":   []byte("+OK\r\n-ERR Unrecognized REPLCONF option: rdb-only\r\n+FULLRESYNC x 0\r\n$18\r\n" + string(rdbOf(nil, false))),
		"not-redis":          []byte(replies + "$18\r\nPK\x03\x04 not an RDB ..."),
		"long-line":          []byte(strings.Repeat("+", 70_000) + "\r\n"),
		"cut-header":         []byte(replies + "$18\r\nREDIS"),
		"bad-version":        []byte(replies + "$18\r\nREDIS00x1\xff\x00\x00\x00\x00\x00\x00\x00\x00"),
		"not-fullresync":     []byte("+OK\r\n+OK\r\n+CONTINUE\r\n"),
		"negative-length":    []byte(replies + "$-1\r\n"),
	}
	if err := fuzzcorpus.Write("FuzzFetch", seeds); err != nil {
		t.Fatal(err)
	}
}
