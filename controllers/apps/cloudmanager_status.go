package apps

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// Condition and event reasons of a CloudManager, besides the shared ones of an AppService.
const (
	ReasonTierReady         = "Ready"
	ReasonTierProgressing   = "Progressing"
	ReasonTierWaiting       = "WaitingForPreviousTier"
	ReasonTierNotReconciled = "NotReconciled"
	ReasonAllTiersReady     = "AllTiersReady"
	ReasonTiersDeploying    = "Deploying"
	ReasonTiersDegraded     = "Degraded"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonPasswordSecret    = "RootPasswordSecretUnavailable"
	ReasonPlainTextPassword = "PlainTextRootPassword"
	ReasonDeleted           = "Deleted"
)

// invalidSpecError is a spec the operator cannot build objects from.
type invalidSpecError struct{ err error }

func (e *invalidSpecError) Error() string { return e.err.Error() }
func (e *invalidSpecError) Unwrap() error { return e.err }

// passwordSecretError is a Secret named by spec.db.rootPasswordSecretRef that is missing or
// lacks the key. Its message never holds a password.
type passwordSecretError struct{ msg string }

func (e *passwordSecretError) Error() string { return e.msg }

// tierConditions are the condition types of the tiers, in bring-up order.
var tierConditions = []struct{ component, condition string }{
	{resources.ComponentFront, appsv1api.ConditionFrontReady},
	{resources.ComponentIdentity, appsv1api.ConditionIdentityReady},
	{resources.ComponentDB, appsv1api.ConditionDatabaseReady},
}

// setCloudManagerStatus derives the status from the tiers one reconcile saw and the error
// that stopped it, if any.
func setCloudManagerStatus(cm *appsv1api.CloudManager, t *cloudManagerTiers, err error) {
	st := &cm.Status
	gen := cm.Generation
	st.ObservedGeneration = gen
	frontWant := resources.TierReplicas(cm.Spec.Front.Deployment.Replicas)
	identityWant := resources.TierReplicas(cm.Spec.Identity.Deployment.Replicas)
	dbWant := resources.TierReplicas(cm.Spec.DB.StatefulSet.Replicas)

	front := deploymentTier(t.front, frontWant, false, "")
	identity := deploymentTier(t.identity, identityWant, t.identityWaiting, "front")
	db := statefulSetTier(t.db, dbWant, t.dbWaiting)
	pods := []*string{&st.Front, &st.Identity, &st.DB}
	observed := []bool{t.front != nil, t.identity != nil, t.db != nil}

	// A failed step leaves the tiers after it unchecked; they, and a failed tier whose object
	// was not read, keep their last pod counts. Validate and cleanup come first.
	unchecked := err != nil && t.failed == ""
	for i, tier := range []tierState{front, identity, db} {
		tc := tierConditions[i]
		switch {
		case unchecked:
			status.Set(&st.Conditions, gen, tc.condition, metav1.ConditionUnknown, ReasonTierNotReconciled,
				"not checked: an earlier step failed")
			continue
		case err != nil && t.failed == tc.component:
			status.Set(&st.Conditions, gen, tc.condition, metav1.ConditionFalse, degradedReason(err), err.Error())
			unchecked = true
			if !observed[i] {
				continue
			}
		default:
			status.Set(&st.Conditions, gen, tc.condition, tier.status, tier.reason, tier.message)
		}
		*pods[i] = tier.pods
	}

	setCloudManagerDegraded(&st.Conditions, gen, err, firstProblem(deploymentStuck(t.front), deploymentStuck(t.identity)))
	degraded := meta.IsStatusConditionTrue(st.Conditions, appsv1api.ConditionDegraded)
	notReady := ""
	for _, tc := range tierConditions {
		if c := meta.FindStatusCondition(st.Conditions, tc.condition); c.Status != metav1.ConditionTrue && notReady == "" {
			notReady = tc.component + ": " + c.Message
		}
	}
	switch {
	case degraded:
		c := meta.FindStatusCondition(st.Conditions, appsv1api.ConditionDegraded)
		status.Set(&st.Conditions, gen, appsv1api.ConditionReady, metav1.ConditionFalse, ReasonTiersDegraded, c.Message)
		st.Phase = appsv1api.CloudManagerDegraded
	case notReady == "":
		status.Set(&st.Conditions, gen, appsv1api.ConditionReady, metav1.ConditionTrue, ReasonAllTiersReady,
			"the front, identity and database tiers are ready")
		st.Phase = appsv1api.CloudManagerReady
	default:
		status.Set(&st.Conditions, gen, appsv1api.ConditionReady, metav1.ConditionFalse, ReasonTiersDeploying, notReady)
		st.Phase = appsv1api.CloudManagerDeploying
		if t.front == nil && t.identity == nil && t.db == nil {
			st.Phase = appsv1api.CloudManagerPending
		}
	}
}

// tierState is one tier's condition and pod count.
type tierState struct {
	status          metav1.ConditionStatus
	reason, message string
	pods            string
}

func deploymentTier(d *appsv1.Deployment, want int32, waiting bool, previous string) tierState {
	var available int32
	if d != nil {
		available = d.Status.AvailableReplicas
	}
	s := tierState{pods: fmt.Sprintf("%d/%d", available, want)}
	switch {
	case waiting:
		s.status, s.reason, s.message = metav1.ConditionFalse, ReasonTierWaiting, "waiting for the "+previous+" tier to become ready"
	case deploymentReady(d, want):
		s.status, s.reason, s.message = metav1.ConditionTrue, ReasonTierReady, fmt.Sprintf("%d of %d pods available", available, want)
	default:
		s.status, s.reason, s.message = metav1.ConditionFalse, ReasonTierProgressing,
			fmt.Sprintf("%d of %d pods available with the current spec", updatedAvailable(d), want)
	}
	return s
}

func statefulSetTier(sts *appsv1.StatefulSet, want int32, waiting bool) tierState {
	var ready int32
	if sts != nil {
		ready = sts.Status.ReadyReplicas
	}
	s := tierState{pods: fmt.Sprintf("%d/%d", ready, want)}
	switch {
	case waiting:
		s.status, s.reason, s.message = metav1.ConditionFalse, ReasonTierWaiting, "waiting for the identity tier to become ready"
	case statefulSetReady(sts, want):
		s.status, s.reason, s.message = metav1.ConditionTrue, ReasonTierReady, fmt.Sprintf("%d of %d pods ready", ready, want)
	default:
		s.status, s.reason, s.message = metav1.ConditionFalse, ReasonTierProgressing,
			fmt.Sprintf("%d of %d pods ready", ready, want)
	}
	return s
}

// deploymentReady reports whether d runs want pods of its current spec, all available.
func deploymentReady(d *appsv1.Deployment, want int32) bool {
	if d == nil || d.Generation != d.Status.ObservedGeneration {
		return false
	}
	c := deploymentCondition(d, appsv1.DeploymentAvailable)
	return c != nil && c.Status == "True" && d.Status.Replicas == want &&
		d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas >= want
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// updatedAvailable is how many pods of the current spec are available, as far as the
// Deployment's status tells.
func updatedAvailable(d *appsv1.Deployment) int32 {
	if d == nil || d.Generation != d.Status.ObservedGeneration {
		return 0
	}
	return min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas)
}

// statefulSetReady reports whether s runs want pods of its current revision, all ready.
func statefulSetReady(s *appsv1.StatefulSet, want int32) bool {
	if s == nil || s.Generation != s.Status.ObservedGeneration {
		return false
	}
	return s.Status.Replicas == want && s.Status.ReadyReplicas >= want && s.Status.AvailableReplicas >= want &&
		s.Status.UpdatedReplicas == want && s.Status.CurrentRevision == s.Status.UpdateRevision
}

// degradedReason is the condition reason of a reconcile error.
func degradedReason(err error) string {
	var notOurs *child.NotControlledError
	var invalid *invalidSpecError
	var secret *passwordSecretError
	switch {
	case errors.As(err, &notOurs):
		return ReasonNotControlled
	case errors.As(err, &invalid):
		return ReasonInvalidSpec
	case errors.As(err, &secret):
		return ReasonPasswordSecret
	default:
		return ReasonReconcileError
	}
}

// setCloudManagerDegraded sets Degraded from a reconcile error or a stuck rollout. For a
// child that is not ours the message is the error's, which recordChildOutcome compares to
// emit its Warning once.
func setCloudManagerDegraded(conds *[]metav1.Condition, gen int64, err error, stuck rolloutProblem) {
	switch {
	case err != nil:
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionTrue, degradedReason(err), err.Error())
	case stuck.reason != "":
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionTrue, stuck.reason, stuck.message)
	default:
		status.Set(conds, gen, appsv1api.ConditionDegraded, metav1.ConditionFalse, ReasonReconciled, "all children match the spec")
	}
}

// readyMessage is the Ready condition's message.
func readyMessage(cm *appsv1api.CloudManager) string {
	if c := meta.FindStatusCondition(cm.Status.Conditions, appsv1api.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// firstProblem is the first of the tiers' rollout problems.
func firstProblem(problems ...rolloutProblem) rolloutProblem {
	for _, p := range problems {
		if p.reason != "" {
			return p
		}
	}
	return rolloutProblem{}
}
