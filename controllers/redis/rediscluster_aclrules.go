package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// aclCheckTimeout bounds the check of new rules on one node.
const aclCheckTimeout = 5 * time.Second

// aclRulesInvalidError is the spec's new ACL rules as a running node refused them.
type aclRulesInvalidError struct{ msg string }

func (e *aclRulesInvalidError) Error() string { return e.msg }

// readACLVerdict reads what a node said about the spec's ACL rules, without asking one. A
// redis-server whose user line holds a rule it does not know does not start, so the first
// pod replaced with such rules would never run again. The API server checks the form of
// each rule (the CRD's CEL rules); only Redis knows its command and category names, so when
// the spec's rules differ from the StatefulSet's template a node is asked first
// (StepCheckACLRules, checkACLRules), and until it has said yes the StatefulSet is not
// written (writeStatefulSet): s.aclUnchecked while no node was asked, s.aclRejected once
// one refused. Each verdict is remembered for the cluster's rules, so a node is asked once
// per change.
func (r *RedisClusterReconciler) readACLVerdict(ctx context.Context, s *state) error {
	if !resources.RedisACLEnabled(s.rc) {
		return nil
	}
	if s.sts == nil {
		if err := r.readStatefulSetIfAny(ctx, s); err != nil {
			return err
		}
	}
	if s.sts == nil || resources.RedisACLRulesInTemplate(s.rc, s.sts) {
		return nil // nothing runs yet, or the pods run these rules already
	}
	verdict, known := r.aclVerdicts.lookup(client.ObjectKeyFromObject(s.rc), aclRulesDigest(resources.RedisACLRuleSets(s.rc)))
	s.aclRejected, s.aclUnchecked = verdict, !known
	return nil
}

// checkACLRules asks a running node about the spec's ACL rules (the step planned it:
// readACLVerdict found none asked) and remembers the verdict; a refusal is a Warning event,
// and holds the StatefulSet from this reconcile on.
func (r *RedisClusterReconciler) checkACLRules(ctx context.Context, s *state) error {
	sets := resources.RedisACLRuleSets(s.rc)
	verdict, err := r.askACLRules(ctx, s, sets)
	if err != nil {
		return err
	}
	r.aclVerdicts.remember(client.ObjectKeyFromObject(s.rc), aclRulesDigest(sets), verdict)
	r.changes.touch(client.ObjectKeyFromObject(s.rc)) // the next look writes the template the verdict lets through
	s.aclUnchecked = false
	if verdict != nil {
		s.aclRejected = verdict
		r.event(s, corev1.EventTypeWarning, report.ReasonInvalidACLRules, "Configure", "%s", verdict.Error())
	}
	return nil
}

// askACLRules checks sets on the first running node that answers. It returns the refusal
// (nil: every set is taken), or an error when no node could be asked.
func (r *RedisClusterReconciler) askACLRules(ctx context.Context, s *state, sets []resources.RedisACLRuleSet) (*aclRulesInvalidError, error) {
	if err := r.listPods(ctx, s); err != nil {
		return nil, err
	}
	rules := make([]string, len(sets))
	for i, set := range sets {
		rules[i] = set.Rules
	}
	var errs []error
	for i := range s.pods {
		p := &s.pods[i]
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		verdicts, err := func() ([]error, error) {
			ctx, cancel := context.WithTimeout(ctx, aclCheckTimeout)
			defer cancel()
			return r.adminFor(s).CheckACLRules(ctx, clusterconn.PodAddr(s.rc, p), rules)
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
			continue
		}
		return aclRefusal(sets, verdicts, p.Name), nil
	}
	return nil, fmt.Errorf("while checking the new ACL rules before any pod starts with them: no running node answers (%w)", errors.Join(errs...))
}

// aclRefusal says which fields the node refused, with the rule and Redis's reason, or nil.
func aclRefusal(sets []resources.RedisACLRuleSet, verdicts []error, pod string) *aclRulesInvalidError {
	var refused []string
	for i, v := range verdicts {
		if v == nil {
			continue
		}
		var rule *execute.ACLRulesError
		if errors.As(v, &rule) && rule.Rule != "" {
			refused = append(refused, fmt.Sprintf("%s (user %s): Redis refuses the rule %q: %s", sets[i].Field, sets[i].User, rule.Rule, rule.Reason))
		} else {
			refused = append(refused, fmt.Sprintf("%s (user %s): Redis refuses the rules: %v", sets[i].Field, sets[i].User, v))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return &aclRulesInvalidError{fmt.Sprintf("%s (checked on %s); correct it: until then no pod is replaced and the nodes keep the rules they run",
		strings.Join(refused, "; "), pod)}
}

// aclRulesDigest identifies a cluster's rules: each field and its rules.
func aclRulesDigest(sets []resources.RedisACLRuleSet) string {
	var b strings.Builder
	for _, set := range sets {
		b.WriteString(set.Field + "=" + set.Rules + "\n")
	}
	return b.String()
}

// aclVerdicts remembers, for each cluster, the last rules checked on a node and the verdict
// (nil: taken). Its zero value is ready to use.
type aclVerdicts struct {
	mu   sync.Mutex
	last map[types.NamespacedName]aclVerdict
}

type aclVerdict struct {
	digest  string
	refusal *aclRulesInvalidError
}

// lookup returns the verdict on the cluster's rules digest, if they were checked last.
func (v *aclVerdicts) lookup(key types.NamespacedName, digest string) (*aclRulesInvalidError, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	last, ok := v.last[key]
	if !ok || last.digest != digest {
		return nil, false
	}
	return last.refusal, true
}

// remember keeps the verdict on the cluster's rules digest.
func (v *aclVerdicts) remember(key types.NamespacedName, digest string, refusal *aclRulesInvalidError) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.last == nil {
		v.last = map[types.NamespacedName]aclVerdict{}
	}
	v.last[key] = aclVerdict{digest: digest, refusal: refusal}
}

// forget drops a deleted cluster.
func (v *aclVerdicts) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.last, key)
}
