package credentials

import (
	"errors"
	"fmt"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// TestRotationStep: a node that refuses every password stops the rotation with an error; a
// node that does not answer (held by its start guard, starting, down) is waited for and
// does not stop the healing steps; success is neither.
func TestRotationStep(t *testing.T) {
	cases := map[string]struct {
		err            error
		silent, failed bool
	}{
		"accepted":                {},
		"refuses every password":  {err: fmt.Errorf("127.1.0.1:6379: %w", conn.ErrWrongPassword), failed: true},
		"does not answer":         {err: errors.New("while connecting to 127.1.0.1:6379: dial tcp: connection refused"), silent: true},
		"answers, then times out": {err: errors.New("i/o timeout"), silent: true},
	}
	for name, tc := range cases {
		silent, err := rotationStep(tc.err)
		if silent != tc.silent || (err != nil) != tc.failed {
			t.Errorf("%s: silent %t, error %v; want silent %t, failed %t", name, silent, err, tc.silent, tc.failed)
		}
	}
}
