package rdbload

import (
	"errors"
	"fmt"
	"strings"
)

// setProbe is SET with an option no Redis knows: a node refuses it after its ACL check,
// with NOPERM when the user may not run SET (or write the key), else with a syntax error.
// Nothing is written either way.
var setProbe = []byte("*4\r\n$3\r\nSET\r\n$13\r\nmwo-set-probe\r\n$1\r\nx\r\n$9\r\nMWO-PROBE\r\n")

// setAllowed asks the node whether the connection's user may run SET, before start: an ACL
// that grants RESTORE need not grant SET (the operator's own user has RESTORE only), and a
// load that sent SET regardless would stop at its first string.
func (p *pipeline) setAllowed() (bool, error) {
	if _, err := p.w.Write(setProbe); err != nil {
		return false, fmt.Errorf("while asking whether SET is allowed: %w", err)
	}
	if err := p.w.Flush(); err != nil {
		return false, fmt.Errorf("while asking whether SET is allowed: %w", err)
	}
	var reply replyError
	switch err := readReply(p.r); {
	case errors.As(err, &reply):
		return !strings.HasPrefix(string(reply), "NOPERM"), nil
	case err != nil:
		return false, fmt.Errorf("while asking whether SET is allowed: %w", err)
	}
	return false, nil // no node takes the option; keep to RESTORE if one did
}
