package credentials

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestGeneratedPasswordIsKeptAndNeverMadeAgainOverAFormedCluster: the generated password
// Secret is made once and read back the same; once it is gone from a formed cluster the
// keeper refuses to make a new one (the nodes run with the lost one: a new password would
// lock the operator out), naming the Secret; a cluster not yet formed gets a new one.
func TestGeneratedPasswordIsKeptAndNeverMadeAgainOverAFormedCluster(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "u1"}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(rc).Build()
	k := &Keeper{Client: c, Scheme: testenv.Scheme(), Recorder: events.NewFakeRecorder(10), UserObject: c.Get}
	var first Facts
	if err := k.EnsurePassword(t.Context(), rc, &first, false); err != nil || first.Password == "" {
		t.Fatalf("first EnsurePassword: %q, %v", first.Password, err)
	}
	var again Facts
	if err := k.ReadPassword(t.Context(), rc, &again); err != nil || again.Password != first.Password {
		t.Fatalf("ReadPassword after it was made: same %t, %v", again.Password == first.Password, err)
	}
	if err := k.EnsurePassword(t.Context(), rc, &again, true); err != nil || again.Password != first.Password {
		t.Fatalf("EnsurePassword over the kept Secret: same %t, %v", again.Password == first.Password, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.RedisPasswordSecretName(rc)}}
	if err := c.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	var lost *report.PasswordLostError
	if err := k.EnsurePassword(t.Context(), rc, &Facts{}, true); !errors.As(err, &lost) || lost.Secret != secret.Name {
		t.Fatalf("EnsurePassword of a formed cluster whose Secret is gone: %v, want a PasswordLostError naming %s", err, secret.Name)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(secret), &corev1.Secret{}); err == nil {
		t.Fatal("a new password Secret was made over a formed cluster")
	}
	var fresh Facts
	if err := k.EnsurePassword(t.Context(), rc, &fresh, false); err != nil || fresh.Password == "" || fresh.Password == first.Password {
		t.Fatalf("EnsurePassword of a cluster not formed yet: new %t, %v", fresh.Password != first.Password, err)
	}
}

// TestLoginIsThePasswordEveryNodeAccepts: without ACL users the operator logs in as the
// default user with its applied record's password (what every node accepts) over the
// Secret's; with ACL users as the operator's user with the first password every node
// accepts. The planner sees the record of each credential.
func TestLoginIsThePasswordEveryNodeAccepts(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}}
	record := resources.RedisAppliedPasswordSecret(rc, resources.RedisAppliedPasswordSecretName(rc), "applied", "", metav1.Now().Time)
	f := &Facts{Password: "in-the-secret", Applied: map[string]*corev1.Secret{record.Name: record}}
	if got := f.Login(rc); got.User != "" || got.Password != "applied" {
		t.Errorf("login %+v, want the default user with the applied password", got)
	}
	if got := (&Facts{Password: "in-the-secret"}).Login(rc); got.Password != "in-the-secret" {
		t.Errorf("login before any record %+v, want the Secret's password", got)
	}
	rot := Rotation(rc, f, 0)
	if len(rot.Credentials) != 1 || !rot.Credentials[0].Recorded || rot.Credentials[0].Current != "applied" || rot.Credentials[0].Desired != "in-the-secret" {
		t.Errorf("the planner's credentials %+v, want the default user recorded at applied, desiring the Secret's", rot.Credentials)
	}

	acl := rc.DeepCopy()
	acl.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true}
	f = &Facts{OperatorPasswords: []string{"every-node", "retiring"}}
	if got := f.Login(acl); got.User != resources.RedisOperatorUser || got.Password != "every-node" {
		t.Errorf("login with ACL users %+v, want %s with the password every node accepts", got, resources.RedisOperatorUser)
	}
	if n := len(Rotation(acl, f, 0).Credentials); n != 3 {
		t.Errorf("%d credentials with ACL users and none of spec.acl.users, want 3 (operator, default, exporter)", n)
	}
}

// TestRotationGrace: the planner's grace is the Keeper's when positive, DefaultGrace
// otherwise (a zero or negative PasswordGrace would retire the old password at once).
func TestRotationGrace(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}}
	for grace, want := range map[time.Duration]time.Duration{0: DefaultGrace, -time.Second: DefaultGrace, 5 * time.Second: 5 * time.Second} {
		if got := (&Keeper{Grace: grace}).Rotation(rc, &Facts{}).Grace; got != want {
			t.Errorf("Grace %s: the planner waits %s, want %s", grace, got, want)
		}
	}
}
