package plan

import (
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepCheckACLRules gives the spec's new ACL rules to a scratch user on a running node
// before any pod starts with them: a redis-server whose user line holds a rule it does not
// know does not start. The verdict is remembered for these rules; a refusal holds the
// StatefulSet's template (TemplateHeld) until the rules change.
const StepCheckACLRules StepKind = "CheckACLRules"

// planCheckACLRules asks a node about the spec's ACL rules once they differ from the
// StatefulSet template's and no node was asked about them yet (ACLRulesUnchecked), first
// of all: the template is held until then. With no node answering, nothing can be asked
// and the other steps go on (the template stays held).
func planCheckACLRules(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	if !spec.ACLRulesUnchecked || len(s.Answering()) == 0 {
		return Step{}, false
	}
	return Step{Kind: StepCheckACLRules, After: LookSoon, Reason: "checking the new ACL rules on a running node before any pod starts with them"}, true
}
