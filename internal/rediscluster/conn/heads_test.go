package conn

import (
	"errors"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// TestBulkString: a CLUSTER INFO reply is read once all of it is there; an error reply is
// the node's words (at most maxErrorReply bytes); anything else, or a length out of
// bounds, is a protocol error.
func TestBulkString(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for name, tc := range map[string]struct {
		in       string
		want     string
		complete bool
		err      string
	}{
		"whole":                {in: "$5\r\nhello\r\n", want: "hello", complete: true},
		"empty":                {in: "$0\r\n\r\n", want: "", complete: true},
		"no line yet":          {in: "$12"},
		"half the string":      {in: "$11\r\nhello"},
		"no final CRLF yet":    {in: "$5\r\nhello"},
		"an error reply":       {in: "-NOAUTH Authentication required.\r\n", err: "NOAUTH Authentication required."},
		"a long error reply":   {in: "-ERR " + long + "\r\n", err: ("ERR " + long)[:maxErrorReply]},
		"a simple string":      {in: "+OK\r\n", err: rdbstream.ErrProtocol.Error()},
		"a negative length":    {in: "$-1\r\n", err: rdbstream.ErrProtocol.Error()},
		"a length too long":    {in: "$70000\r\n", err: rdbstream.ErrProtocol.Error()},
		"a length not numeric": {in: "$abc\r\n", err: rdbstream.ErrProtocol.Error()},
	} {
		reply, complete, err := bulkString([]byte(tc.in))
		switch {
		case tc.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) || (tc.err != rdbstream.ErrProtocol.Error()) != !errors.Is(err, rdbstream.ErrProtocol) {
				t.Errorf("%s: error %v, want one starting %q", name, err, tc.err)
			}
			if tc.err == ("ERR " + long)[:maxErrorReply] && len(err.Error()) != maxErrorReply {
				t.Errorf("%s: the error carries %d bytes, want %d", name, len(err.Error()), maxErrorReply)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case complete != tc.complete || string(reply) != tc.want:
			t.Errorf("%s: %q complete %v, want %q complete %v", name, reply, complete, tc.want, tc.complete)
		}
	}
}
