package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

func TestRetryable(t *testing.T) {
	live, cancel := context.WithCancel(context.Background())
	defer cancel()
	cases := map[string]struct {
		err  error
		want bool
	}{
		"no error":                       {nil, false},
		"the node closed the connection": {fmt.Errorf("while reading: %w", io.EOF), true},
		"reset":                          {&net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		"refused while dialing":          {&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		"a read timed out (frozen node)": {&net.OpError{Op: "read", Err: timeoutErr{}}, false},
		"wrong password":                 {errors.New("WRONGPASS invalid username-password pair"), false},
		"out of time":                    {context.DeadlineExceeded, false},
		"a Redis error":                  {errors.New("ERR unknown command"), false},
	}
	for name, tc := range cases {
		if got := retryable(live, tc.err); got != tc.want {
			t.Errorf("%s: retryable %t, want %t", name, got, tc.want)
		}
	}
}

// timeoutErr is a network error that says it timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
