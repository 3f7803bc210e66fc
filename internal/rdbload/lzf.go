package rdbload

import (
	"fmt"
	"slices"
)

// lzfDecompress appends to dst the decompression of in, an LZF block (liblzf, as Redis
// writes it) of size bytes uncompressed. Each control byte c is either a literal run (c <
// 32: the next c+1 bytes) or a back reference (length c>>5, plus a byte when that is 7, plus
// 2; offset (c&31)<<8 | the next byte, plus 1, back from the end of the output). The output
// never grows past size: the caller has admitted size (and checked it against len(in)), and
// a block that would write more is refused when it tries.
func lzfDecompress(dst, in []byte, size int) ([]byte, error) {
	base := len(dst)
	dst = slices.Grow(dst, size)
	end := base + size
	for i := 0; i < len(in); {
		c := int(in[i])
		i++
		if c < 32 {
			run := c + 1
			if i+run > len(in) {
				return dst, fmt.Errorf("%w: an LZF literal runs past the input", ErrCorrupt)
			}
			if len(dst)+run > end {
				return dst, fmt.Errorf("%w: LZF output runs past the %d bytes the RDB says", ErrCorrupt, size)
			}
			dst = append(dst, in[i:i+run]...)
			i += run
			continue
		}
		n := c >> 5
		if n == 7 {
			if i >= len(in) {
				return dst, fmt.Errorf("%w: an LZF reference is cut", ErrCorrupt)
			}
			n += int(in[i])
			i++
		}
		n += 2
		if i >= len(in) {
			return dst, fmt.Errorf("%w: an LZF reference is cut", ErrCorrupt)
		}
		back := (c&0x1f)<<8 | int(in[i]) + 1
		i++
		from := len(dst) - back
		if from < base {
			return dst, fmt.Errorf("%w: an LZF reference points before the output", ErrCorrupt)
		}
		if len(dst)+n > end {
			return dst, fmt.Errorf("%w: LZF output runs past the %d bytes the RDB says", ErrCorrupt, size)
		}
		for k := range n { // byte by byte: the source may overlap what is being written
			dst = append(dst, dst[from+k])
		}
	}
	if len(dst)-base != size {
		return dst, fmt.Errorf("%w: LZF gave %d bytes, the RDB says %d", ErrCorrupt, len(dst)-base, size)
	}
	return dst, nil
}
