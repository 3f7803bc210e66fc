package child

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestOutcomesRecordOneEventPerOutcome(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "ns"}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	type noted struct {
		live    client.Object
		outcome Outcome
		err     error
	}
	for _, tc := range []struct {
		name  string
		noted []noted
		want  []string
	}{
		{"both children created", []noted{{dep, Created, nil}, {svc, Created, nil}}, []string{"Normal Created Created Deployment web, Service web"}},
		{"one updated, one unchanged", []noted{{dep, Updated, nil}, {svc, Unchanged, nil}}, []string{"Normal Updated Updated Deployment web"}},
		{"one created, one updated", []noted{{dep, Updated, nil}, {svc, Created, nil}}, []string{"Normal Created Created Service web", "Normal Updated Updated Deployment web"}},
		{"nothing changed", []noted{{dep, Unchanged, nil}, {svc, Unchanged, nil}}, nil},
		{"a child that is not ours warns at once", []noted{{dep, Unchanged, &NotControlledError{Kind: "Deployment", Name: "web"}}},
			[]string{"Warning ChildNotControlled " + (&NotControlledError{Kind: "Deployment", Name: "web"}).Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			var o Outcomes
			for _, n := range tc.noted {
				o.Note(rec, owner, nil, n.live, n.outcome, n.err)
			}
			o.Record(rec, owner)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}
