package execute

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	goredis "github.com/redis/go-redis/v9"
)

// TestPasswordRotationSteps: after AddPassword a node accepts both passwords and its
// masterauth is the new one; after KeepOnlyPassword only the new one works; both steps can
// run again; a node that refuses every password offered says so with conn.ErrWrongPassword.
func TestPasswordRotationSteps(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startServers(t, 1, "old-secret", "--requirepass", "old-secret")[0]
	accepts := func(pw string) bool {
		t.Helper()
		ok, err := conn.Accepts(ctx, s.addr, nil, conn.Login{Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !accepts("old-secret") || accepts("new-secret") {
		t.Fatal("before the rotation, the node should accept exactly the old password")
	}
	for range 2 {
		if err := AddPassword(ctx, s.addr, nil, PasswordChange{User: "default", AsPasswords: []string{"new-secret", "old-secret"}, New: "new-secret", MasterAuth: true}); err != nil {
			t.Fatal(err)
		}
	}
	if !accepts("old-secret") || !accepts("new-secret") {
		t.Error("after AddPassword, the node should accept both passwords")
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: "new-secret"})
	defer func() { _ = c.Close() }()
	if got, err := c.ConfigGet(ctx, "masterauth").Result(); err != nil || got["masterauth"] != "new-secret" {
		t.Errorf("masterauth is %q (%v), want the new password", got["masterauth"], err)
	}
	for range 2 {
		if err := KeepOnlyPassword(ctx, s.addr, nil, PasswordChange{User: "default", AsPasswords: []string{"new-secret"}, New: "new-secret", MasterAuth: true}); err != nil {
			t.Fatal(err)
		}
	}
	if accepts("old-secret") || !accepts("new-secret") {
		t.Error("after KeepOnlyPassword, the node should accept exactly the new password")
	}
	err := AddPassword(ctx, s.addr, nil, PasswordChange{User: "default", AsPasswords: []string{"old-secret", "wrong"}, New: "third", MasterAuth: true})
	if !errors.Is(err, conn.ErrWrongPassword) {
		t.Errorf("AddPassword with only refused passwords: %v, want conn.ErrWrongPassword", err)
	}
}

// TestPasswordRotationAsAdminUser: with ACL users the steps authenticate as the admin user,
// which may change users but not read keys. The default user's password rotates and
// masterauth (the admin user's password, which replicas use) stays as it was; then the
// admin user's own password rotates, masterauth following it.
func TestPasswordRotationAsAdminUser(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startServers(t, 1, "old-secret",
		"--user", "default", "on", ">old-secret", "~*", "+@all", "-@admin",
		"--user", "admin", "on", ">admin-secret", "-@all", "+ping", "+acl|setuser", "+config|get", "+config|set",
		"--masteruser", "admin", "--masterauth", "admin-secret")[0]
	accepts := func(user, pw string) bool {
		t.Helper()
		ok, err := conn.Accepts(ctx, s.addr, nil, conn.Login{User: user, Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	masterauth := func(pw string) string {
		c := goredis.NewClient(&goredis.Options{Addr: s.addr, Username: "admin", Password: pw})
		defer func() { _ = c.Close() }()
		got, err := c.ConfigGet(ctx, "masterauth").Result()
		if err != nil {
			return err.Error()
		}
		return got["masterauth"]
	}
	app := PasswordChange{User: "default", As: "admin", AsPasswords: []string{"wrong", "admin-secret"}, New: "new-secret"}
	if err := AddPassword(ctx, s.addr, nil, app); err != nil {
		t.Fatal(err)
	}
	if !accepts("default", "new-secret") || !accepts("default", "old-secret") {
		t.Error("after AddPassword as admin the default user should accept both passwords")
	}
	if err := KeepOnlyPassword(ctx, s.addr, nil, app); err != nil {
		t.Fatal(err)
	}
	if accepts("default", "old-secret") || !accepts("default", "new-secret") {
		t.Error("after KeepOnlyPassword as admin the default user should accept exactly the new password")
	}
	if got := masterauth("admin-secret"); got != "admin-secret" {
		t.Errorf("masterauth is %q, want the admin user's password, unchanged", got)
	}

	own := PasswordChange{User: "admin", As: "admin", AsPasswords: []string{"admin-secret", "admin-next"}, New: "admin-next", MasterAuth: true}
	if err := AddPassword(ctx, s.addr, nil, own); err != nil {
		t.Fatal(err)
	}
	if !accepts("admin", "admin-secret") || !accepts("admin", "admin-next") {
		t.Error("after AddPassword the admin user should accept both of its passwords")
	}
	own.AsPasswords = []string{"admin-next"}
	if err := KeepOnlyPassword(ctx, s.addr, nil, own); err != nil {
		t.Fatal(err)
	}
	if accepts("admin", "admin-secret") || !accepts("admin", "admin-next") {
		t.Error("after KeepOnlyPassword the admin user should accept exactly its new password")
	}
	if got := masterauth("admin-next"); got != "admin-next" {
		t.Errorf("masterauth is %q, want the admin user's new password", got)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, Username: "admin", Password: "admin-next"})
	defer func() { _ = c.Close() }()
	if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("the admin user reads keys: %v, want NOPERM", err)
	}
}
