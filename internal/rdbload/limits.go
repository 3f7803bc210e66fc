package rdbload

import "errors"

// ErrTooLarge: a record of the RDB (a key with its value, or a function library) is larger
// than the loader holds (Options.MaxRecord), or a length in it claims so. The RDB may be
// well-formed; it cannot be restored by this operator as configured.
var ErrTooLarge = errors.New("RDB record too large")

// DefaultMaxRecord is the largest record Load holds by default (Options.MaxRecord): a key
// and its value as a DUMP payload, or a function library's code. RESTORE takes the payload
// as one argument, so it is held whole, and a buffer that grows to it leaves up to twice
// its size resident (TestPeakRSS: +64 MiB at 32 MiB, +128 MiB at 64 MiB); 32 MiB keeps that
// well inside the operator's 256 Mi memory limit next to its caches. Redis itself refuses a
// RESTORE argument larger than its proto-max-bulk-len (512 MB by default), so a 512 MB
// value could not be restored through RESTORE in any case.
const DefaultMaxRecord = 32 << 20

// smallRecord is the size up to which a record is held without the gate, and the largest
// buffer kept from one record to the next.
const smallRecord = 1 << 20

// maxString bounds the uncompressed length an LZF string claims: Redis's largest string
// (proto-max-bulk-len's default, 512 MB). A larger claim is corruption.
const maxString = 512 << 20

// lzfMaxRatio is the most LZF can expand: a 3-byte back reference gives 264 bytes. An LZF
// string claiming more than that many times its compressed length is corruption (a
// "compression bomb"), refused before anything is decompressed.
const lzfMaxRatio = 88

// bigRecords admits one record larger than smallRecord at a time across every Load of the
// process: concurrent restores of many clusters hold at most one large record (up to
// twice MaxRecord while its buffer grows) plus about 2 x smallRecord each, whatever their
// data. A Load waiting for it waits at most as long as one record takes to read and send.
var bigRecords = make(chan struct{}, 1)
