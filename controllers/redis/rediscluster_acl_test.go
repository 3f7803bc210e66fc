package redis_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterWithACLUsers forms a cluster with spec.acl on while nothing else changes
// for the application: it writes as the default user with the password Secret's password.
// Each user can do its part and nothing more, on every node: the application runs no
// administrative command, the operator reads and writes no key, the exporter reads only
// statistics, and replicas replicate as the operator's user. The cluster scales out from 3
// to 4 masters (the nodes MIGRATE with AUTH2 as the operator's user), then the application's
// password rotates, then the operator's and the exporter's, with the writer running; every
// acknowledged key reads back through every node. A user of spec.acl.users logs in on every
// node with its Secret's password and reads only its keys; its password rotates with the
// others.
func TestRedisClusterWithACLUsers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	reader, key, rc, pw := runningWithACLUser(t, ns, "acl", "with ACL users",
		redisv1alpha1.ACLUser{Name: "reader", Rules: "~w:* +@read", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "reader-pw", Key: "pw"}}, "reader-password\n")
	users := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "acl-users"}, users); err != nil {
		t.Fatal(err)
	}
	logins := map[string]conn.Login{
		"application": {Password: pw},
		"operator":    {User: resources.RedisOperatorUser, Password: string(users.Data[resources.RedisUsersOperatorKey])},
		"exporter":    {User: resources.RedisExporterUser, Password: string(users.Data[resources.RedisUsersExporterKey])},
		"reader":      {User: "reader", Password: "reader-password"},
	}
	assertNoSecretInProcesses(t, ns, rc.Status.Nodes, pw, logins["operator"].Password, logins["exporter"].Password)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	for _, n := range rc.Status.Nodes {
		assertUserCommands(t.Context(), t, n.Instance, logins)
	}

	scaleOutToFourMasters(t, key, "with ACL users")

	newPw := fmt.Sprintf("acl-rotated-%d", time.Now().UnixNano())
	testenv.Update(t, env.Client, client.ObjectKey{Namespace: ns, Name: "acl-password"}, &corev1.Secret{}, func(s *corev1.Secret) {
		s.Data["password"] = []byte(newPw)
	})
	rotateStart := time.Now()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionPasswordApplied)
		return c != nil && c.Status == metav1.ConditionTrue && hasEvent(ctx, ns, "PasswordRotated"), fmt.Sprintf("condition %v", c)
	})
	t.Logf("the application's password rotated in %.1f s", time.Since(rotateStart).Seconds())
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	logins["application"] = conn.Login{Password: newPw}
	for _, n := range rc.Status.Nodes {
		if ok, err := conn.Accepts(t.Context(), n.Instance, nil, conn.Login{Password: pw}); err != nil || ok {
			t.Errorf("%s still accepts the old password (%v)", n.Name, err)
		}
		assertUserCommands(t.Context(), t, n.Instance, logins)
	}

	// The operator's and the exporter's passwords rotate the same way, changed by hand in
	// the users Secret: replicas keep replicating (masterauth follows the operator's).
	// So does the password of a user of spec.acl.users, changed in its own Secret.
	oldLogins := map[string]conn.Login{"operator": logins["operator"], "exporter": logins["exporter"], "reader": logins["reader"]}
	suffix := fmt.Sprint(time.Now().UnixNano())
	testenv.Update(t, env.Client, client.ObjectKey{Namespace: ns, Name: "acl-users"}, &corev1.Secret{}, func(s *corev1.Secret) {
		s.Data[resources.RedisUsersOperatorKey] = []byte("operator-" + suffix)
		s.Data[resources.RedisUsersExporterKey] = []byte("exporter-" + suffix)
	})
	testenv.Update(t, env.Client, client.ObjectKeyFromObject(reader), &corev1.Secret{}, func(s *corev1.Secret) {
		s.Data["pw"] = []byte("reader-" + suffix)
	})
	logins["operator"] = conn.Login{User: resources.RedisOperatorUser, Password: "operator-" + suffix}
	logins["exporter"] = conn.Login{User: resources.RedisExporterUser, Password: "exporter-" + suffix}
	logins["reader"] = conn.Login{User: "reader", Password: "reader-" + suffix}
	rotateStart = time.Now()
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionPasswordApplied); c == nil || c.Status != metav1.ConditionTrue {
			return false, fmt.Sprintf("condition %v", c)
		}
		for _, n := range rc.Status.Nodes {
			for user, old := range oldLogins {
				if ok, err := conn.Accepts(ctx, n.Instance, nil, old); err != nil || ok {
					return false, fmt.Sprintf("%s accepts the old password of the %s (%v)", n.Name, user, err)
				}
			}
		}
		return true, ""
	})
	t.Logf("the operator's, the exporter's and the reader's passwords rotated in %.1f s", time.Since(rotateStart).Seconds())
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	for _, n := range rc.Status.Nodes {
		assertUserCommands(t.Context(), t, n.Instance, logins)
	}
	applied := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "acl-exporter-applied"}, applied); err != nil {
		t.Fatal(err)
	}
	if file := string(applied.Data[resources.RedisExporterPasswordFileKey]); !strings.Contains(file, `"exporter-`+suffix+`"`) {
		t.Errorf("the exporter's password file does not hold its new password")
	}

	time.Sleep(time.Second)
	written, outage := w.Stop()
	t.Logf("the writer wrote %d keys; its longest failing stretch %s", written, outage.Round(time.Millisecond))
	w.Verify(t, env.Client, rc, newPw)
	for _, secret := range []string{newPw, logins["operator"].Password, logins["exporter"].Password, oldLogins["operator"].Password} {
		if strings.Contains(logs.String(), secret) {
			t.Error("a password appears in the operator's logs")
		}
	}
}

// assertUserCommands checks on the node at addr that each user of logins runs what it needs
// and is refused (NOPERM) what it must not run.
func assertUserCommands(ctx context.Context, t *testing.T, addr string, logins map[string]conn.Login) {
	t.Helper()
	cases := []struct {
		user    string
		args    []any
		allowed bool
	}{
		{"application", []any{"CLUSTER", "SLOTS"}, true},
		{"application", []any{"GET", "w:1"}, true},
		{"application", []any{"CONFIG", "GET", "masterauth"}, false},
		{"application", []any{"CLUSTER", "FORGET", "0000000000000000000000000000000000000000"}, false},
		{"application", []any{"ACL", "SETUSER", resources.RedisOperatorUser, "nopass"}, false},
		{"application", []any{"KEYS", "*"}, false},
		{"application", []any{"FLUSHALL"}, false},
		{"application", []any{"MIGRATE", "127.0.0.1", 1, "", 0, 100, "KEYS", "w:1"}, false},
		{"operator", []any{"CONFIG", "GET", "maxmemory"}, false},
		{"operator", []any{"SCAN", 0}, false},
		{"reader", []any{"GET", "w:1"}, true},
		{"reader", []any{"GET", "other"}, false},
		{"reader", []any{"SET", "w:1", "x"}, false},
		{"operator", []any{"CLUSTER", "NODES"}, true},
		{"operator", []any{"CLUSTER", "COUNTKEYSINSLOT", 0}, true},
		{"operator", []any{"GET", "w:1"}, false},
		{"operator", []any{"FLUSHALL"}, false},
		{"exporter", []any{"INFO", "stats"}, true},
		{"exporter", []any{"CLUSTER", "INFO"}, true},
		{"exporter", []any{"GET", "w:1"}, false},
		{"exporter", []any{"CONFIG", "GET", "masterauth"}, false},
	}
	clients := map[string]*goredis.Client{}
	for name, l := range logins {
		c := goredis.NewClient(&goredis.Options{Addr: addr, Username: l.User, Password: l.Password, MaxRetries: -1, Protocol: 2})
		defer func() { _ = c.Close() }()
		clients[name] = c
	}
	for _, c := range cases {
		err := clients[c.user].Do(ctx, c.args...).Err()
		denied := err != nil && strings.Contains(err.Error(), "NOPERM")
		if err != nil && !denied && !goredis.HasErrorPrefix(err, "MOVED") && !errors.Is(err, goredis.Nil) {
			t.Errorf("%s: %s %v: %v", addr, c.user, c.args, err)
		}
		if denied == c.allowed {
			t.Errorf("%s: %s may run %v: %v, want %v", addr, c.user, c.args, !denied, c.allowed)
		}
	}
	info, err := clients["operator"].Info(ctx, "replication").Result()
	if err != nil {
		t.Fatalf("%s: INFO as the operator: %v", addr, err)
	}
	if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
		t.Errorf("%s: a replica whose link to its master (as %s) is down:\n%s", addr, resources.RedisOperatorUser, info)
	}
}

// TestRedisClusterACLRefusesAnACLFile: with users on, a user redis.conf that sets aclfile
// would keep every redis-server from starting. The operator says so in Degraded, naming the
// field and the fix, and creates no StatefulSet; once the line is removed it goes on.
func TestRedisClusterACLRefusesAnACLFile(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aclfile-user", Namespace: ns},
		Data: map[string]string{"redis.conf": "maxmemory-policy allkeys-lru\naclfile /data/users.acl\n"}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	rc := redistest.NewCluster(ns, "aclfile", 6)
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true}
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{Configmap: cm.Name}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	refusedUntilFixed(t, rc, "", []string{"spec.pod[0].configmap: redis.conf sets aclfile", "remove the line"}, func() {
		testenv.Update(t, env.Client, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}, func(c *corev1.ConfigMap) {
			c.Data["redis.conf"] = "maxmemory-policy allkeys-lru\n"
		})
	})
}

// refusedUntilFixed waits until rc is Degraded with a message holding each of want (and,
// unless event is "", an event of that reason), checks that no StatefulSet was made, runs
// fix, and waits for the StatefulSet.
func refusedUntilFixed(t *testing.T, rc *redisv1alpha1.RedisCluster, event string, want []string, fix func()) {
	t.Helper()
	key := client.ObjectKeyFromObject(rc)
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || (event != "" && !hasEvent(ctx, rc.Namespace, event)) {
			return false, fmt.Sprintf("Degraded %+v", d)
		}
		for _, w := range want {
			if !strings.Contains(d.Message, w) {
				return false, fmt.Sprintf("Degraded %+v, want %q", d, w)
			}
		}
		return true, ""
	})
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(t.Context(), key, sts); !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet whose pods could not start was created (%v)", err)
	}
	fix()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, key, sts)
		return err == nil, fmt.Sprintf("no StatefulSet once fixed (%v)", err)
	})
}

// TestRedisClusterACLWaitsForAUserSecret: a user of spec.acl.users whose Secret does not
// exist yet would keep every pod from starting. The operator says so in Degraded, naming
// the field and the fix, with a Warning event, and creates no StatefulSet; once the Secret
// is there it goes on.
func TestRedisClusterACLWaitsForAUserSecret(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "acl-later", 6)
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
		{Name: "app", Rules: "~* +@read +@write", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "app-pw"}},
	}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	refusedUntilFixed(t, rc, report.ReasonUserSecretMissing,
		[]string{`spec.acl.users[0].passwordSecret: Secret "app-pw" of user app not found`, `create it with a "password" key`}, func() {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-pw", Namespace: ns}, Data: map[string][]byte{"password": []byte("app-password")}}
			if err := env.Client.Create(t.Context(), secret); err != nil {
				t.Fatal(err)
			}
		})
}

// TestRedisClusterRefusesUnknownACLRules: a user's rules changed to hold a command Redis does
// not know (+gett) pass the API server, whose rules check only their form; the operator asks
// a running node before replacing any pod. The node refuses it, so Degraded
// (InvalidACLRules) and a Warning event name the field, the rule and Redis's reason, the
// StatefulSet keeps the rules the pods run, no pod is replaced, the user keeps its old rules,
// and a writer loses no key. Correcting the rule resumes the rollout: every pod is replaced
// and the user has its new rules.
func TestRedisClusterRefusesUnknownACLRules(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	secret, key, rc, pw := runningWithACLUser(t, ns, "acl-rules", "with a user",
		redisv1alpha1.ACLUser{Name: "app", Rules: "~w:* +@read", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "app-pw"}}, "app-password")
	before := podUIDs(t, ns, rc.Name)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 200)

	setRules := func(rules string) {
		t.Helper()
		redistest.PatchSpec(t, env.Client, key, fmt.Sprintf(`{"spec":{"acl":{"users":[{"name":"app","rules":%q,"passwordSecret":{"name":%q}}]}}}`, rules, secret.Name))
	}
	start := time.Now()
	setRules("~w:* +@read +gett")
	want := `spec.acl.users[0].rules (user app): Redis refuses the rule "+gett": Unknown command or category name in ACL`
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionDegraded)
		return d != nil && d.Status == metav1.ConditionTrue && d.Reason == report.ReasonInvalidACLRules && d.ObservedGeneration == cur.Generation &&
			strings.Contains(d.Message, want) && eventSays(ctx, ns, report.ReasonInvalidACLRules, want), fmt.Sprintf("Degraded %+v", d)
	})
	t.Logf("the unknown command was refused in %.1f s", time.Since(start).Seconds())
	time.Sleep(3 * time.Second) // without the check, a pod would be replaced within a look or two
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(t.Context(), key, sts); err != nil {
		t.Fatal(err)
	}
	if !resources.RedisACLRulesInTemplate(rc, sts) {
		t.Error("the StatefulSet's template took the refused rules")
	}
	if after := podUIDs(t, ns, rc.Name); !maps.Equal(after, before) {
		t.Errorf("pods were replaced for refused rules: %v, were %v", after, before)
	}
	if err := appSet(t.Context(), rc.Status.Nodes[0].Instance); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("the user's old rules are not in force: SET gave %v, want NOPERM", err)
	}
	cur := redistest.WaitShape(t, env.Client, key, 3, 6)
	if ready := meta.FindStatusCondition(cur.Status.Conditions, report.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("the cluster stopped serving: %+v", ready)
	}

	start = time.Now()
	setRules("~w:* +@read +@write")
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		after := podUIDs(t, ns, rc.Name)
		for name, uid := range before {
			if after[name] == uid {
				return false, fmt.Sprintf("%s not replaced yet; phase %s (%s)", name, cur.Status.Phase, cur.Status.Reason)
			}
		}
		return !meta.IsStatusConditionTrue(cur.Status.Conditions, report.ConditionDegraded), fmt.Sprintf("phase %s (%s)", cur.Status.Phase, cur.Status.Reason)
	})
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	t.Logf("the corrected rules rolled out in %.1f s", time.Since(start).Seconds())
	if err := appSet(t.Context(), rc.Status.Nodes[0].Instance); err != nil {
		t.Errorf("the user cannot write with its new rules: %v", err)
	}

	written, outage := w.Stop()
	t.Logf("the writer wrote %d keys; its longest failing stretch %s", written, outage.Round(time.Millisecond))
	w.Verify(t, env.Client, rc, pw)
}

// appSet sets a key as the user app of TestRedisClusterRefusesUnknownACLRules on the node
// at addr: nil when the node takes it or redirects it (MOVED).
func appSet(ctx context.Context, addr string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Username: "app", Password: "app-password", MaxRetries: -1, Protocol: 2})
	defer func() { _ = c.Close() }()
	if err := c.Set(ctx, "w:from-app", "x", 0).Err(); err != nil && !goredis.HasErrorPrefix(err, "MOVED") {
		return err
	}
	return nil
}

// podUIDs maps the pods of the cluster name in ns to their UIDs.
func podUIDs(t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, name))); err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for _, p := range pods.Items {
		uids[p.Name] = p.UID
	}
	return uids
}

// runningWithACLUser creates user's password Secret holding password, then the 6-node
// cluster name in ns with spec.acl and that one user, and waits until it runs (see
// createRunning). It returns the Secret with the cluster's key, object and password.
func runningWithACLUser(t *testing.T, ns, name, how string, user redisv1alpha1.ACLUser, password string) (*corev1.Secret, client.ObjectKey, *redisv1alpha1.RedisCluster, string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: user.PasswordSecret.Name, Namespace: ns},
		Data: map[string][]byte{resources.RedisACLUserSecretKey(user): []byte(password)}}
	if err := env.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	rc := redistest.NewCluster(ns, name, 6)
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{user}}
	key, rc, pw := createRunning(t, rc, how)
	return secret, key, rc, pw
}
