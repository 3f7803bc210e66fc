package execute

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// TestCheckACLRules: a node with users, asked by a user that may only ACL SETUSER (as the
// operator's), says which sets of rules it refuses and which rule, and no user that logs in
// changes: the check user ends off, without a password, rules or keys.
func TestCheckACLRules(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startServers(t, 1, "app-secret",
		"--user", "default", "on", ">app-secret", "~*", "&*", "+@all", "-@dangerous",
		"--user", "admin", "on", ">admin-secret", "~*", "resetchannels", "-@all", "+ping", "+acl|setuser",
		"--user", "root", "on", ">root-secret", "~*", "&*", "+@all")[0]
	a := NewAdmin("admin-secret", 2*time.Second).WithUser("admin")
	defer func() { _ = a.Close() }()
	root := NewAdmin("root-secret", 2*time.Second).WithUser("root")
	defer func() { _ = root.Close() }()
	users := func() string {
		t.Helper()
		list, err := root.Client(s.addr).Do(ctx, "ACL", "LIST").StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(list, "\n")
	}
	before := users()
	sets := []string{"~* &* +@all -@dangerous +info", "~cache:* +gett", "~* +@foo", "%R~a:* (~b:* +get) +cluster|nodes", "~x +cluster|nosuch"}
	verdicts, err := a.CheckACLRules(ctx, s.addr, sets)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "+gett", "+@foo", "", "+cluster|nosuch"}
	for i, v := range verdicts {
		var refused *ACLRulesError
		switch {
		case want[i] == "" && v != nil:
			t.Errorf("%q refused: %v", sets[i], v)
		case want[i] != "" && (!errors.As(v, &refused) || refused.Rule != want[i] || !strings.Contains(refused.Reason, "Unknown command or category")):
			t.Errorf("%q: %v, want %s refused as an unknown command or category", sets[i], v, want[i])
		}
	}
	var others []string
	check := ""
	for _, line := range strings.Split(users(), "\n") {
		if strings.HasPrefix(line, "user "+aclCheckUser+" ") {
			check = line
		} else {
			others = append(others, line)
		}
	}
	if strings.Join(others, "\n") != before {
		t.Errorf("the users changed:\n%s\nwas\n%s", strings.Join(others, "\n"), before)
	}
	if !strings.Contains(check, " off ") || strings.ContainsAny(check, "#~&+") {
		t.Errorf("user %s was not left off with nothing: %q", aclCheckUser, check)
	}
	if ok, err := conn.Accepts(ctx, s.addr, nil, conn.Login{User: aclCheckUser, Password: "x"}); err != nil || ok {
		t.Errorf("user %s logs in (%v)", aclCheckUser, err)
	}
}
