package redis

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

func TestChildChanges(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc", ResourceVersion: "1"}}
	key := types.NamespacedName{Namespace: "ns", Name: "rc"}
	var c childChanges
	steps := []struct {
		name string
		do   func()
		at   time.Duration
		want bool
	}{
		{name: "never ensured", at: 0, want: true},
		{name: "just ensured, nothing changed", do: func() { c.done(rc, t0, false) }, at: time.Second, want: false},
		{name: "still nothing", at: 50 * time.Second, want: false},
		{name: "a minute on: ensured anyway", at: time.Minute, want: true},
		{name: "ensured again", do: func() { c.done(rc, t0.Add(time.Minute), false) }, at: 61 * time.Second, want: false},
		{name: "an owned object changed", do: func() { c.touch(key) }, at: 62 * time.Second, want: true},
		{name: "the mark was taken by the last look", at: 63 * time.Second, want: false},
		{name: "the ensure failed: marked for the next look", do: func() { c.done(rc, t0.Add(63*time.Second), true) }, at: 64 * time.Second, want: true},
		{name: "the cluster changed (its resourceVersion)", do: func() {
			c.done(rc, t0.Add(64*time.Second), false)
			rc = rc.DeepCopy()
			rc.ResourceVersion = "2"
		}, at: 65 * time.Second, want: true},
		{name: "forgotten: ensured as new", do: func() { c.done(rc, t0.Add(65*time.Second), false); c.forget(key) }, at: 66 * time.Second, want: true},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		if got := c.due(rc, t0.Add(s.at)); got != s.want {
			t.Fatalf("%s: due = %v, want %v", s.name, got, s.want)
		}
	}
}

func TestChildChangesOwnerPredicate(t *testing.T) {
	var c childChanges
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc", ResourceVersion: "1"}}
	c.done(rc, time.Now(), false)
	p := c.ownerChanged()
	yes, no := true, false
	owned := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: redisv1alpha1.GroupVersion.String(), Kind: "RedisCluster", Name: "rc", Controller: &yes}}}}
	notOurs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "rc", Controller: &yes},
		{APIVersion: redisv1alpha1.GroupVersion.String(), Kind: "RedisCluster", Name: "rc", Controller: &no}}}}
	if !p.Update(event.UpdateEvent{ObjectOld: notOurs, ObjectNew: notOurs}) {
		t.Fatal("the predicate dropped an event")
	}
	if c.due(rc, time.Now()) {
		t.Fatal("an object another controller owns marked the cluster")
	}
	if !p.Delete(event.DeleteEvent{Object: owned}) {
		t.Fatal("the predicate dropped an event")
	}
	if !c.due(rc, time.Now()) {
		t.Fatal("the deletion of an owned Service did not mark its cluster")
	}
}
