package execute

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// aclCheckUser is the user CheckACLRules gives the rules it checks to. Its name starts with
// "mwo-", which the API refuses for the users of spec.acl.users, so it is never one of them.
const aclCheckUser = "mwo-rulecheck"

// ACLRulesError is a node's refusal of a set of ACL rules: the rule it names, and why.
type ACLRulesError struct {
	// Rule is the rule Redis refused, as written ("" when its answer names none).
	Rule string
	// Reason is Redis's reason ("Unknown command or category name in ACL"), or its whole
	// answer when it names no rule.
	Reason string
}

func (e *ACLRulesError) Error() string {
	if e.Rule == "" {
		return e.Reason
	}
	return fmt.Sprintf("%q: %s", e.Rule, e.Reason)
}

// setUserRefusal is how Redis 7 refuses a rule of ACL SETUSER: "ERR Error in ACL SETUSER
// modifier '<rule>': <reason>".
var setUserRefusal = regexp.MustCompile(`^ERR Error in ACL SETUSER modifier '(.*)': (.*)$`)

// CheckACLRules asks the node at addr whether it takes each set of rules (a space-separated
// list, as a user line or ACL SETUSER takes it), without changing any user that logs in:
// each set goes to the user mwo-rulecheck (aclCheckUser) after "reset", so the user is off
// and has no password while it holds them, and Redis applies none of a set's rules when it
// refuses one. It returns one entry per set, nil or an *ACLRulesError. At the end the user
// is reset to nothing; it stays on the node (off, no password, no key, no command) until
// the node restarts, because the operator's user may run ACL SETUSER but not ACL DELUSER.
// err is a failure to ask (a node that does not answer, a refused login): nothing is known
// of the rules then.
func (a *Admin) CheckACLRules(ctx context.Context, addr string, sets []string) (verdicts []error, err error) {
	conn := a.Client(addr)
	verdicts = make([]error, len(sets))
	for i, rules := range sets {
		args := []any{"ACL", "SETUSER", aclCheckUser, "reset"}
		for _, rule := range strings.Fields(rules) {
			args = append(args, rule)
		}
		err := conn.Do(ctx, args...).Err()
		var redisErr goredis.Error
		switch {
		case err == nil:
		case errors.As(err, &redisErr) && strings.HasPrefix(err.Error(), "ERR Error in ACL SETUSER"):
			verdicts[i] = refusal(err.Error())
		default:
			return nil, fmt.Errorf("while checking ACL rules on %s (ACL SETUSER %s): %w", addr, aclCheckUser, err)
		}
	}
	if err := conn.Do(ctx, "ACL", "SETUSER", aclCheckUser, "reset").Err(); err != nil {
		return nil, fmt.Errorf("while resetting user %s on %s: %w", aclCheckUser, addr, err)
	}
	return verdicts, nil
}

// refusal reads Redis's answer to a set of rules it refused.
func refusal(answer string) *ACLRulesError {
	if m := setUserRefusal.FindStringSubmatch(answer); m != nil {
		return &ACLRulesError{Rule: m[1], Reason: m[2]}
	}
	return &ACLRulesError{Reason: strings.TrimPrefix(answer, "ERR ")}
}
