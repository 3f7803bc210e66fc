package redisarchive

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// DefaultMaxCommand bounds one command of the stream (its RESP bytes): Redis's own
// proto-max-bulk-len is 512 MiB per argument; a command larger than this is refused rather
// than held.
const DefaultMaxCommand = 512 << 20

// ErrProtocol is a replication stream or reply that is not RESP as Redis writes it.
var ErrProtocol = errors.New("unexpected replication protocol data")

// readCommand reads one command of a replication stream (a RESP array of bulk strings, as a
// master writes every command it propagates) and appends its bytes, exactly as received, to
// dst. It returns the grown dst and the command's name and first argument, lower-cased and
// cut at 16 bytes (what is needed to tell PING, REPLCONF GETACK, MULTI and the like apart).
func readCommand(r *bufio.Reader, dst []byte, maxCommand int) (out []byte, name, arg1 string, err error) {
	start := len(dst)
	line, err := readLine(r)
	if err != nil {
		return dst, "", "", err
	}
	if len(line) < 2 || line[0] != '*' {
		return dst, "", "", fmt.Errorf("%w: %q where a command (*<count>) was expected", ErrProtocol, clip(line))
	}
	n, err := strconv.ParseInt(string(line[1:]), 10, 64)
	if err != nil || n < 1 || n > int64(maxCommand)/4 {
		return dst, "", "", fmt.Errorf("%w: a command of %q arguments", ErrProtocol, clip(line))
	}
	dst = append(append(dst, line...), '\r', '\n')
	for i := range n {
		line, err := readLine(r)
		if err != nil {
			return dst, "", "", err
		}
		if len(line) < 2 || line[0] != '$' {
			return dst, "", "", fmt.Errorf("%w: %q where an argument ($<length>) was expected", ErrProtocol, clip(line))
		}
		size, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil || size < 0 || int64(len(dst)-start)+size > int64(maxCommand) {
			return dst, "", "", fmt.Errorf("%w: an argument of %q bytes (at most %d for a command)", ErrProtocol, clip(line), maxCommand)
		}
		dst = append(append(dst, line...), '\r', '\n')
		at := len(dst)
		dst = append(dst, make([]byte, size+2)...)
		if _, err := io.ReadFull(r, dst[at:]); err != nil {
			return dst, "", "", noEOF(err)
		}
		if dst[len(dst)-2] != '\r' || dst[len(dst)-1] != '\n' {
			return dst, "", "", fmt.Errorf("%w: an argument not ended by CRLF", ErrProtocol)
		}
		switch i {
		case 0:
			name = lower(dst[at : at+int(size)])
		case 1:
			arg1 = lower(dst[at : at+int(size)])
		}
	}
	return dst, name, arg1, nil
}

// readLine reads a line ended by CRLF and returns it without the CRLF; the slice is valid
// until the next read of r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, len(line))
	}
	if err != nil {
		return nil, noEOF(err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: a line not ended by CRLF", ErrProtocol)
	}
	return line[:len(line)-2], nil
}

// noEOF turns an end of input inside a command into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// lower returns b lower-cased, cut at 16 bytes.
func lower(b []byte) string {
	if len(b) > 16 {
		b = b[:16]
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// clip cuts a line for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// readReply reads one reply of any RESP2 type and returns the first error it holds (the
// reply itself, or an element of an array such as EXEC's), as text; "" when none.
func readReply(r *bufio.Reader) (string, error) {
	line, err := readLine(r)
	if err != nil {
		return "", err
	}
	if len(line) == 0 {
		return "", fmt.Errorf("%w: an empty reply line", ErrProtocol)
	}
	switch line[0] {
	case '+', ':':
		return "", nil
	case '-':
		return string(line[1:]), nil
	case '$':
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return "", fmt.Errorf("%w: reply %q", ErrProtocol, clip(line))
		}
		if n >= 0 {
			if _, err := r.Discard(int(n) + 2); err != nil {
				return "", noEOF(err)
			}
		}
		return "", nil
	case '*':
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return "", fmt.Errorf("%w: reply %q", ErrProtocol, clip(line))
		}
		first := ""
		for range max(n, 0) {
			msg, err := readReply(r)
			if err != nil {
				return "", err
			}
			if first == "" {
				first = msg
			}
		}
		return first, nil
	}
	return "", fmt.Errorf("%w: reply %q", ErrProtocol, clip(line))
}
