package rdbload

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
)

// setProbe is SET with an option no Redis knows: a node refuses it after its ACL check,
// with NOPERM when the user may not run SET (or write the key), else with a syntax error.
// Nothing is written either way.
var setProbe = []byte("*4\r\n$3\r\nSET\r\n$13\r\nmwo-set-probe\r\n$1\r\nx\r\n$9\r\nMWO-PROBE\r\n")

// msetProbe is MSET with a key and no value for the second: it passes the arity check (at
// least 3 arguments) and the ACL's, then fails on the odd count (or, in a cluster, earlier
// with MOVED when the node does not own the key's slot). Nothing is written either way.
var msetProbe = []byte("*4\r\n$4\r\nMSET\r\n$14\r\nmwo-mset-probe\r\n$1\r\nx\r\n$14\r\nmwo-mset-probe\r\n")

// writesAllowed asks the node whether the connection's user may run SET and MSET, before
// start: an ACL that grants RESTORE need not grant SET (the operator's own user has RESTORE
// only), nor one that grants SET grant MSET, and a load that sent them regardless would stop
// at its first string.
func (p *pipeline) writesAllowed() (set, mset bool, err error) {
	for _, probe := range [][]byte{setProbe, msetProbe} {
		if _, err := p.w.Write(probe); err != nil {
			return false, false, fmt.Errorf("while asking whether SET and MSET are allowed: %w", err)
		}
	}
	if err := p.w.Flush(); err != nil {
		return false, false, fmt.Errorf("while asking whether SET and MSET are allowed: %w", err)
	}
	if set, err = probeAllowed(p.r); err != nil {
		return false, false, err
	}
	if mset, err = probeAllowed(p.r); err != nil {
		return false, false, err
	}
	return set, set && mset, nil
}

// probeAllowed reads the answer to a probe: any error but NOPERM means the ACL let it
// through; a success (no node answers one) counts as refused, to keep to RESTORE.
func probeAllowed(r *bufio.Reader) (bool, error) {
	var reply replyError
	switch err := readReply(r); {
	case errors.As(err, &reply):
		return !strings.HasPrefix(string(reply), "NOPERM"), nil
	case err != nil:
		return false, fmt.Errorf("while asking whether SET and MSET are allowed: %w", err)
	}
	return false, nil
}
