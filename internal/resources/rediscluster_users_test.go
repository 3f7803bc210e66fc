package resources_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// userCommand is a command a user must, or must not, be allowed to run.
type userCommand []any

// The passwords of the users' test server.
const (
	appPassword      = `a"pp\pass word`
	operatorPassword = "operatorpassword"
	exporterPassword = "exporterpassword"
	readerPassword   = "reader password"
)

// operatorMust is every command the operator's user must run: each one the operator's steps
// send, or that the nodes send as this user for it (see resources.RedisOperatorUserRules).
// PSYNC is checked for real below (a backup's stream), and RESTORE with FUNCTION LOAD once
// more (a restore's load).
var operatorMust = []userCommand{
	{"PING"}, {"INFO", "replication"}, {"DBSIZE"},
	{"CLUSTER", "NODES"}, {"CLUSTER", "INFO"}, {"CLUSTER", "COUNTKEYSINSLOT", 0}, {"CLUSTER", "GETKEYSINSLOT", 0, 10},
	{"CLUSTER", "MEET", "127.0.0.1", 1}, {"CLUSTER", "ADDSLOTSRANGE", 0, 1}, {"CLUSTER", "REPLICATE", "0000000000000000000000000000000000000000"},
	{"CLUSTER", "SET-CONFIG-EPOCH", 1}, {"CLUSTER", "FORGET", "0000000000000000000000000000000000000000"},
	{"CLUSTER", "RESET", "HARD"}, {"CLUSTER", "FAILOVER"}, {"CLUSTER", "SETSLOT", 0, "STABLE"}, {"CLUSTER", "BUMPEPOCH"},
	{"MIGRATE", "127.0.0.1", 1, "", 0, 100, "KEYS", "nokey"}, {"ASKING"}, {"DUMP", "k"}, {"MEMORY", "USAGE", "k"}, {"SELECT", 0},
	{"RESTORE-ASKING", "r", 0, "not a payload"}, {"REPLCONF", "capa", "eof"},
	{"RESTORE", "r", 0, "not a payload"}, {"FUNCTION", "LOAD", "not a library"},
	{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, {"ACL", "SETUSER", resources.RedisOperatorUser, "on", ">" + operatorPassword},
}

// operatorMustNot: the application's commands (reading, writing, listing or deleting keys,
// channels, scripts), reading the configuration or the users, and the administrative
// commands no step of the operator sends.
var operatorMustNot = []userCommand{
	{"GET", "k"}, {"SET", "k", "x"}, {"DEL", "k"}, {"EXISTS", "k"}, {"TYPE", "k"}, {"TTL", "k"}, {"OBJECT", "ENCODING", "k"},
	{"MEMORY", "DOCTOR"}, {"MEMORY", "PURGE"}, {"RANDOMKEY"}, {"SCAN", 0}, {"KEYS", "*"}, {"SORT", "k"}, {"RENAME", "k", "l"},
	{"FLUSHALL"}, {"FLUSHDB"}, {"SWAPDB", 0, 1}, {"EVAL", "return 1", 0}, {"FCALL", "f", 0}, {"FUNCTION", "FLUSH"},
	{"FUNCTION", "DELETE", "lib"}, {"PUBLISH", "c", "m"}, {"MULTI"},
	{"CONFIG", "GET", "masterauth"}, {"CONFIG", "REWRITE"}, {"CONFIG", "RESETSTAT"},
	{"ACL", "LIST"}, {"ACL", "GETUSER", "default"}, {"ACL", "DELUSER", "x"}, {"ACL", "SAVE"}, {"ACL", "LOAD"}, {"ACL", "LOG"},
	{"ACL", "DRYRUN", "default", "get", "k"},
	{"SHUTDOWN", "NOSAVE"}, {"DEBUG", "SLEEP", 0}, {"MONITOR"}, {"REPLICAOF", "127.0.0.1", 1}, {"SLAVEOF", "127.0.0.1", 1},
	{"FAILOVER"}, {"SYNC"}, {"CLIENT", "KILL", "127.0.0.2:1"}, {"CLIENT", "LIST"}, {"MODULE", "LOAD", "/x.so"},
	{"SAVE"}, {"BGSAVE"}, {"BGREWRITEAOF"}, {"SLOWLOG", "GET"},
	{"CLUSTER", "ADDSLOTS", 0}, {"CLUSTER", "DELSLOTS", 0}, {"CLUSTER", "FLUSHSLOTS"}, {"CLUSTER", "SAVECONFIG"},
}

// exporterMust is every command of resources.RedisExporterUserRules: what redis_exporter
// reads.
var exporterMust = []userCommand{
	{"PING"}, {"INFO", "all"}, {"DBSIZE"}, {"SELECT", 0}, {"CLUSTER", "INFO"}, {"CLUSTER", "NODES"},
	{"SLOWLOG", "LEN"}, {"LATENCY", "LATEST"}, {"CLIENT", "LIST"},
}

// exporterMustNot: any key or channel, the configuration (CONFIG GET masterauth is the
// operator's password), the slow log's entries (SLOWLOG GET: commands with their
// arguments, key names and values), users, and every change.
var exporterMustNot = []userCommand{
	{"SLOWLOG", "GET"}, {"SLOWLOG", "GET", 1},
	{"GET", "k"}, {"SET", "k", "x"}, {"SCAN", 0}, {"KEYS", "*"}, {"DUMP", "k"}, {"EXISTS", "k"}, {"PUBLISH", "c", "m"},
	{"CONFIG", "GET", "masterauth"}, {"CONFIG", "SET", "maxmemory", 0}, {"ACL", "LIST"}, {"ACL", "SETUSER", "x"},
	{"MIGRATE", "127.0.0.1", 1, "", 0, 100, "KEYS", "k"}, {"PSYNC", "?", -1}, {"SYNC"}, {"MONITOR"},
	{"CLIENT", "KILL", "127.0.0.2:1"}, {"SLOWLOG", "RESET"}, {"LATENCY", "RESET"}, {"CLUSTER", "FORGET", "x"},
	{"CLUSTER", "COUNTKEYSINSLOT", 0}, {"FLUSHALL"}, {"SHUTDOWN", "NOSAVE"},
}

// applicationMust is what the application's default user keeps with the default rules:
// every data command, transactions, scripts, channels, and what cluster clients and the
// readiness probe read.
var applicationMust = []userCommand{
	{"PING"}, {"SET", "k", "v"}, {"GET", "k"}, {"DEL", "gone"}, {"EXISTS", "k"}, {"EXPIRE", "gone", 10}, {"SCAN", 0},
	{"HSET", "h", "f", "v"}, {"LPUSH", "l", "v"}, {"SADD", "s", "v"}, {"ZADD", "z", 1, "v"}, {"XADD", "x", "*", "f", "v"},
	{"DUMP", "k"}, {"OBJECT", "ENCODING", "k"}, {"MEMORY", "USAGE", "k"}, {"RENAME", "h", "h2"},
	{"EVAL", "return 1", 0}, {"FUNCTION", "LIST"}, {"PUBLISH", "c", "m"}, {"INFO", "replication"}, {"DBSIZE"},
	{"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}, {"CLUSTER", "INFO"}, {"CLUSTER", "KEYSLOT", "k"},
	{"CLUSTER", "MYID"}, {"ASKING"}, {"READONLY"}, {"READWRITE"}, {"CLIENT", "SETNAME", "app"}, {"WAIT", 0, 1},
}

// applicationMustNot is @dangerous, which the default rules drop: the administrative
// commands, and the data commands that block a node or reach everything (KEYS, FLUSHALL,
// SORT, MIGRATE and RESTORE, which copy data to or from any host).
var applicationMustNot = []userCommand{
	{"KEYS", "*"}, {"FLUSHALL"}, {"FLUSHDB"}, {"SWAPDB", 0, 1}, {"SORT", "l"}, {"MIGRATE", "127.0.0.1", 1, "", 0, 100, "KEYS", "k"},
	{"RESTORE", "r", 0, "payload"}, {"CONFIG", "GET", "masterauth"}, {"CONFIG", "SET", "maxmemory", 1}, {"CONFIG", "REWRITE"},
	{"ACL", "SETUSER", resources.RedisOperatorUser, "nopass"}, {"ACL", "LIST"}, {"ACL", "GETUSER", "default"}, {"ACL", "LOG"},
	{"SHUTDOWN", "NOSAVE"}, {"DEBUG", "SLEEP", 0}, {"MONITOR"}, {"REPLICAOF", "127.0.0.1", 1}, {"FAILOVER"},
	{"PSYNC", "?", -1}, {"SYNC"}, {"REPLCONF", "capa", "eof"}, {"CLIENT", "KILL", "127.0.0.2:1"}, {"CLIENT", "LIST"},
	{"MODULE", "LOAD", "/x.so"}, {"SAVE"}, {"BGSAVE"}, {"SLOWLOG", "GET"}, {"LATENCY", "LATEST"}, {"ROLE"},
	{"CLUSTER", "FORGET", "0000000000000000000000000000000000000000"}, {"CLUSTER", "MEET", "127.0.0.1", 1},
	{"CLUSTER", "RESET"}, {"CLUSTER", "FAILOVER"}, {"CLUSTER", "SETSLOT", 0, "STABLE"}, {"CLUSTER", "ADDSLOTS", 0},
}

// TestRedisUsersMustAndMustNot starts a real redis-server with the ACL start script and the
// pod environment of a RedisCluster with spec.acl (the default rules, and one user of
// spec.acl.users), and runs as each built-in user every command it must have and a list it
// must not (NOPERM). Each allowed command of the operator's and the exporter's rules has a
// row. The operator streams a backup (PSYNC), loads it back (RESTORE, FUNCTION LOAD) and
// moves a key to a second node (MIGRATE with AUTH2: SELECT and RESTORE there as its user).
func TestRedisUsersMustAndMustNot(t *testing.T) {
	ctx := t.Context()
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name, rc.Namespace = "cache", "prod"
	rc.Spec.Replicas = 6
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
		{Name: "reader", Rules: "~cache:* -@all +@read +ping", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "reader-pw"}},
	}}
	srv := startUsersServer(t, rc)
	peer := startUsersServer(t, rc)

	checked := commandNames(append(slices.Clone(operatorMust), userCommand{"PSYNC"})) // PSYNC: the backup's stream below
	if got := ruleCommands(resources.RedisOperatorUserRules); !slices.Equal(got, checked) {
		t.Errorf("the operator's rules allow %v, the test checks %v: give every allowed command a row", got, checked)
	}
	if got := ruleCommands(resources.RedisExporterUserRules); !slices.Equal(got, commandNames(exporterMust)) {
		t.Errorf("the exporter's rules allow %v, the test checks %v: give every allowed command a row", got, commandNames(exporterMust))
	}
	app := usersClient(t, srv, "", appPassword)
	checkUser(ctx, t, "application", app, applicationMust, applicationMustNot)
	checkUser(ctx, t, "operator", usersClient(t, srv, resources.RedisOperatorUser, operatorPassword), operatorMust, operatorMustNot)
	checkUser(ctx, t, "exporter", usersClient(t, srv, resources.RedisExporterUser, exporterPassword), exporterMust, exporterMustNot)
	reader := usersClient(t, srv, "reader", readerPassword)
	checkUser(ctx, t, "reader", reader, []userCommand{{"GET", "cache:1"}, {"MGET", "cache:1", "cache:2"}, {"PING"}},
		[]userCommand{{"GET", "other"}, {"SET", "cache:1", "x"}, {"DEL", "cache:1"}, {"CONFIG", "GET", "maxmemory"}, {"INFO"}})
	t.Logf("commands checked: application %d+%d, operator %d+%d (+PSYNC, RESTORE, FUNCTION LOAD, MIGRATE for real), exporter %d+%d, reader 3+5",
		len(applicationMust), len(applicationMustNot), len(operatorMust), len(operatorMustNot), len(exporterMust), len(exporterMustNot))

	// A backup's stream, then a restore's load, as the operator.
	if err := app.Do(ctx, "SET", "cache:1", "one").Err(); err != nil {
		t.Fatal(err)
	}
	if err := app.Do(ctx, "FUNCTION", "LOAD", "REPLACE", "#!lua name=mwotest\nredis.register_function('mwo_echo', function(keys, args) return args[1] end)").Err(); err != nil {
		t.Fatal(err)
	}
	operator := rdbstream.Options{Addr: "127.0.0.1:" + srv.port, Username: resources.RedisOperatorUser, Password: operatorPassword}
	var rdb bytes.Buffer
	if _, err := rdbstream.Fetch(ctx, operator, &rdb); err != nil {
		t.Fatalf("a backup's PSYNC as the operator: %v", err)
	}
	for name, login := range map[string][2]string{"application": {"", appPassword}, "exporter": {resources.RedisExporterUser, exporterPassword}} {
		_, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: operator.Addr, Username: login[0], Password: login[1]}, &bytes.Buffer{})
		if !errors.Is(err, rdbstream.ErrAuth) {
			t.Errorf("PSYNC as the %s: %v, want refused", name, err)
		}
	}
	loaded, err := rdbload.Load(ctx, rdbload.Options{Node: rdbstream.Options{Addr: "127.0.0.1:" + peer.port,
		Username: resources.RedisOperatorUser, Password: operatorPassword}}, &rdb)
	if err != nil || loaded.Restored == 0 || loaded.Functions != 1 {
		t.Errorf("a restore's load as the operator: %+v, %v; want the keys and 1 library", loaded, err)
	}
	peerApp := usersClient(t, peer, "", appPassword)
	if got, _ := peerApp.Do(ctx, "GET", "cache:1").Text(); got != "one" {
		t.Errorf("after the restore cache:1 = %q, want one", got)
	}

	// A slot move's MIGRATE as the operator: the node logs in to the other as the operator
	// (AUTH2) and sends SELECT and RESTORE there.
	if err := app.Do(ctx, "SET", "cache:moved", "m").Err(); err != nil {
		t.Fatal(err)
	}
	op := usersClient(t, srv, resources.RedisOperatorUser, operatorPassword)
	if err := op.Do(ctx, "MIGRATE", "127.0.0.1", peer.port, "", 0, 5000, "REPLACE",
		"AUTH2", resources.RedisOperatorUser, operatorPassword, "KEYS", "cache:moved").Err(); err != nil {
		t.Errorf("MIGRATE as the operator: %v", err)
	}
	if got, _ := peerApp.Do(ctx, "GET", "cache:moved").Text(); got != "m" {
		t.Errorf("after MIGRATE the other node has cache:moved = %q, want m", got)
	}

	auth, err := os.ReadFile(filepath.Join(srv.dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(auth), "masteruser "+resources.RedisOperatorUser+"\nmasterauth \""+operatorPassword+"\"") {
		t.Errorf("replicas do not authenticate as %s with its password", resources.RedisOperatorUser)
	}
	if out := srv.cli("", "ping"); !strings.Contains(out, "NOAUTH") {
		t.Errorf("the server answers without a password: %s", out)
	}
	srv.assertNoSecretPassed(t, appPassword, operatorPassword, exporterPassword, readerPassword)
}

// TestRedisDefaultUserRulesConfigurable: spec.acl.defaultUserRules replaces the default
// user's rules (here "+@all" gives CONFIG GET back, and a key pattern restricts the keys); a
// user of spec.acl.users whose password file is missing stops the start script (the
// operator checks the Secret before it gets there).
func TestRedisDefaultUserRulesConfigurable(t *testing.T) {
	ctx := t.Context()
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name, rc.Namespace = "cache", "prod"
	rc.Spec.Replicas = 6
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, DefaultUserRules: " ~app:* &* +@all "}
	srv := startUsersServer(t, rc)
	app := usersClient(t, srv, "", appPassword)
	checkUser(ctx, t, "application", app,
		[]userCommand{{"CONFIG", "GET", "maxmemory"}, {"KEYS", "app:*"}, {"SET", "app:1", "v"}},
		[]userCommand{{"SET", "other", "v"}, {"GET", "other"}})

	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
		{Name: "reader", Rules: "~* +@read", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "reader-pw"}},
	}}
	script, env := usersScript(t, rc, t.TempDir())
	cmd := runStartScript(t, script, usersFiles(), env...)
	time.Sleep(time.Second)
	if out := cmd.cli(appPassword, "ping"); out == "PONG" {
		t.Errorf("redis-server started although the password file of user reader is missing")
	}
}

// startUsersServer runs the ACL start script with the environment and password files the
// pod of rc would have; the user "reader" of spec.acl.users, if any, has readerPassword.
func startUsersServer(t *testing.T, rc *redisv1alpha1.RedisCluster) *scriptServer {
	t.Helper()
	dir := t.TempDir()
	script, env := usersScript(t, rc, dir)
	if err := os.WriteFile(filepath.Join(dir, "reader"), []byte(readerPassword+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	srv := runStartScript(t, script, usersFiles(), env...)
	srv.waitFor(t, appPassword)
	return srv
}

// usersScript is the start script of rc's pods with RedisACLUsersDir moved to dir, and the
// ACL part of their environment.
func usersScript(t *testing.T, rc *redisv1alpha1.RedisCluster, dir string) (string, []string) {
	t.Helper()
	c := resources.RedisStatefulSet(rc, rc.Spec.Replicas).Spec.Template.Spec.Containers[0]
	var env []string
	for _, e := range c.Env {
		if e.Name == resources.RedisDefaultUserRulesEnv || e.Name == resources.RedisACLUsersEnv {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	if len(rc.Spec.ACL.Users) > 0 && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == resources.RedisACLUsersVolume && m.MountPath == resources.RedisACLUsersDir
	}) {
		t.Errorf("the users' passwords are not mounted at %s", resources.RedisACLUsersDir)
	}
	return strings.ReplaceAll(c.Command[2], resources.RedisACLUsersDir, dir), env
}

func usersFiles() map[string]string {
	return map[string]string{
		resources.RedisPasswordFile:                                     appPassword,
		resources.RedisUsersDir + "/" + resources.RedisUsersOperatorKey: operatorPassword,
		resources.RedisUsersDir + "/" + resources.RedisUsersExporterKey: exporterPassword,
	}
}

func usersClient(t *testing.T, srv *scriptServer, user, password string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + srv.port, Username: user, Password: password, Protocol: 2,
		MaxRetries: -1, DisableIdentity: true, ReadTimeout: 2 * time.Second, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// checkUser runs must (each must not be refused with NOPERM) and mustNot (each must be) as
// one user. DEBUG and MODULE are refused before the ACL looks (enable-debug-command and
// enable-module-command are off by default): that refusal counts too.
func checkUser(ctx context.Context, t *testing.T, user string, c *goredis.Client, must, mustNot []userCommand) {
	t.Helper()
	run := func(cmd userCommand) (denied bool) {
		err := c.Do(ctx, cmd...).Err()
		if err != nil && (strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS")) {
			t.Fatalf("%s cannot log in: %v", user, err)
		}
		return err != nil && (strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "command not allowed"))
	}
	for _, cmd := range must {
		if run(cmd) {
			t.Errorf("%s is refused %v, which it must run", user, cmd)
		}
	}
	for _, cmd := range mustNot {
		if !run(cmd) {
			t.Errorf("%s may run %v, which it must not", user, cmd)
		}
	}
}

// ruleCommands lists the commands ("cmd" or "cmd|sub") rules allow with +, sorted.
func ruleCommands(rules string) []string {
	var out []string
	for _, f := range strings.Fields(rules) {
		if strings.HasPrefix(f, "+") && !strings.HasPrefix(f, "+@") {
			out = append(out, strings.ToLower(f[1:]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// commandNames lists the commands of cmds as ruleCommands names them, sorted: "cmd|sub" for
// the commands with subcommands.
func commandNames(cmds []userCommand) []string {
	withSub := map[string]bool{"cluster": true, "config": true, "acl": true, "function": true, "slowlog": true, "latency": true, "client": true, "memory": true}
	var out []string
	for _, c := range cmds {
		name := strings.ToLower(c[0].(string)) //nolint:forcetypeassert // every command starts with its name
		if withSub[name] {
			name += "|" + strings.ToLower(c[1].(string)) //nolint:forcetypeassert // and its subcommand
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
