package apps

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
)

func readyDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}},
		},
	}
}

func readyStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			CurrentRevision: "r1", UpdateRevision: "r1",
		},
	}
}

func TestSetCloudManagerStatus(t *testing.T) {
	rolling := readyDeployment()
	rolling.Generation = 3 // the Deployment controller has not seen the new template yet
	stuck := readyDeployment()
	stuck.Status.Conditions = append(stuck.Status.Conditions, appsv1.DeploymentCondition{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow",
	})
	rollingDB := readyStatefulSet()
	rollingDB.Status.UpdateRevision = "r2"
	cases := map[string]struct {
		tiers cloudManagerTiers
		err   error
		phase appsv1api.CloudManagerPhase
		conds map[string]string // type -> status/reason
		pods  [3]string         // front, identity, db
	}{
		"nothing created yet": {
			phase: appsv1api.CloudManagerPending,
			conds: map[string]string{"FrontReady": "False/Progressing", "Ready": "False/Deploying", "Degraded": "False/Reconciled"},
			pods:  [3]string{"0/1", "0/1", "0/1"},
		},
		"front coming up, the others wait": {
			tiers: cloudManagerTiers{front: &appsv1.Deployment{}, identityWaiting: true, dbWaiting: true},
			phase: appsv1api.CloudManagerDeploying,
			conds: map[string]string{
				"FrontReady": "False/Progressing", "IdentityReady": "False/WaitingForPreviousTier",
				"DatabaseReady": "False/WaitingForPreviousTier", "Ready": "False/Deploying",
			},
			pods: [3]string{"0/1", "0/1", "0/1"},
		},
		"front rolling out a new template": {
			tiers: cloudManagerTiers{front: rolling, identity: readyDeployment(), db: readyStatefulSet()},
			phase: appsv1api.CloudManagerDeploying,
			conds: map[string]string{"FrontReady": "False/Progressing", "IdentityReady": "True/Ready", "Ready": "False/Deploying"},
			pods:  [3]string{"1/1", "1/1", "1/1"},
		},
		"database rolling out a new revision": {
			tiers: cloudManagerTiers{front: readyDeployment(), identity: readyDeployment(), db: rollingDB},
			phase: appsv1api.CloudManagerDeploying,
			conds: map[string]string{"DatabaseReady": "False/Progressing", "Ready": "False/Deploying"},
			pods:  [3]string{"1/1", "1/1", "1/1"},
		},
		"all ready": {
			tiers: cloudManagerTiers{front: readyDeployment(), identity: readyDeployment(), db: readyStatefulSet()},
			phase: appsv1api.CloudManagerReady,
			conds: map[string]string{
				"FrontReady": "True/Ready", "IdentityReady": "True/Ready", "DatabaseReady": "True/Ready",
				"Ready": "True/AllTiersReady", "Degraded": "False/Reconciled",
			},
			pods: [3]string{"1/1", "1/1", "1/1"},
		},
		"front not ours": {
			tiers: cloudManagerTiers{failed: "front"},
			err:   &child.NotControlledError{Kind: "Deployment", Name: "ake-front"},
			phase: appsv1api.CloudManagerDegraded,
			conds: map[string]string{
				"FrontReady": "False/ChildNotControlled", "IdentityReady": "Unknown/NotReconciled",
				"DatabaseReady": "Unknown/NotReconciled", "Ready": "False/Degraded", "Degraded": "True/ChildNotControlled",
			},
			pods: [3]string{"prev", "prev", "prev"},
		},
		"password Secret missing": {
			tiers: cloudManagerTiers{front: readyDeployment(), identity: readyDeployment(), failed: "db"},
			err:   &passwordSecretError{msg: "no Secret"},
			phase: appsv1api.CloudManagerDegraded,
			conds: map[string]string{
				"IdentityReady": "True/Ready", "DatabaseReady": "False/RootPasswordSecretUnavailable",
				"Degraded": "True/RootPasswordSecretUnavailable",
			},
			pods: [3]string{"1/1", "1/1", "prev"},
		},
		"cleanup failed": {
			tiers: cloudManagerTiers{},
			err:   errors.New("while listing: boom"),
			phase: appsv1api.CloudManagerDegraded,
			conds: map[string]string{
				"FrontReady": "Unknown/NotReconciled", "DatabaseReady": "Unknown/NotReconciled", "Degraded": "True/ReconcileError",
			},
			pods: [3]string{"prev", "prev", "prev"},
		},
		"invalid spec": {
			err:   &invalidSpecError{err: errors.New("bad size")},
			phase: appsv1api.CloudManagerDegraded,
			conds: map[string]string{"Degraded": "True/InvalidSpec", "Ready": "False/Degraded"},
		},
		"front rollout stuck": {
			tiers: cloudManagerTiers{front: stuck, identity: readyDeployment(), db: readyStatefulSet()},
			phase: appsv1api.CloudManagerDegraded,
			conds: map[string]string{"Degraded": "True/ProgressDeadlineExceeded", "Ready": "False/Degraded"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cm := &appsv1api.CloudManager{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
			cm.Status.Front, cm.Status.Identity, cm.Status.DB = "prev", "prev", "prev"
			setCloudManagerStatus(cm, &tc.tiers, tc.err)
			if cm.Status.Phase != tc.phase || cm.Status.ObservedGeneration != 7 {
				t.Errorf("phase %s observedGeneration %d, want %s 7", cm.Status.Phase, cm.Status.ObservedGeneration, tc.phase)
			}
			for typ, want := range tc.conds {
				c := meta.FindStatusCondition(cm.Status.Conditions, typ)
				if c == nil {
					t.Errorf("no %s condition", typ)
					continue
				}
				if got := string(c.Status) + "/" + c.Reason; got != want || c.ObservedGeneration != 7 {
					t.Errorf("%s = %s (generation %d), want %s (7)", typ, got, c.ObservedGeneration, want)
				}
			}
			if len(cm.Status.Conditions) != 5 {
				t.Errorf("%d conditions, want FrontReady, IdentityReady, DatabaseReady, Ready and Degraded", len(cm.Status.Conditions))
			}
			if tc.pods != [3]string{} {
				if got := [3]string{cm.Status.Front, cm.Status.Identity, cm.Status.DB}; got != tc.pods {
					t.Errorf("pods %v, want %v", got, tc.pods)
				}
			}
		})
	}
}
