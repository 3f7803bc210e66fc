package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestPasswordRotationSteps: after AddPassword a node accepts both passwords and its
// masterauth is the new one; after KeepOnlyPassword only the new one works; both steps can
// run again; a node that refuses every password offered says so with ErrWrongPassword.
func TestPasswordRotationSteps(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startServers(t, 1, "old-secret", "--requirepass", "old-secret")[0]
	accepts := func(pw string) bool {
		t.Helper()
		ok, err := Accepts(ctx, s.addr, nil, pw)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !accepts("old-secret") || accepts("new-secret") {
		t.Fatal("before the rotation, the node should accept exactly the old password")
	}
	for range 2 {
		if err := AddPassword(ctx, s.addr, nil, nil, []string{"new-secret", "old-secret"}, "new-secret"); err != nil {
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
		if err := KeepOnlyPassword(ctx, s.addr, nil, nil, "new-secret"); err != nil {
			t.Fatal(err)
		}
	}
	if accepts("old-secret") || !accepts("new-secret") {
		t.Error("after KeepOnlyPassword, the node should accept exactly the new password")
	}
	err := AddPassword(ctx, s.addr, nil, nil, []string{"old-secret", "wrong"}, "third")
	if !errors.Is(err, ErrWrongPassword) {
		t.Errorf("AddPassword with only refused passwords: %v, want ErrWrongPassword", err)
	}
}

// TestPasswordRotationAsAdminUser: with ACL users the steps authenticate as the admin user,
// which may change users but not read keys; the default user's password rotates, and
// masterauth (the admin user's password, which replicas use) stays as it was.
func TestPasswordRotationAsAdminUser(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := &Login{User: "admin", Password: "admin-secret"}
	s := startServers(t, 1, "old-secret",
		"--user", "default", "on", ">old-secret", "~*", "+@all", "-@admin",
		"--user", "admin", "on", ">admin-secret", "-@all", "+ping", "+acl|setuser", "+config|get",
		"--masteruser", "admin", "--masterauth", "admin-secret")[0]
	if err := AddPassword(ctx, s.addr, nil, admin, []string{"wrong"}, "new-secret"); err != nil {
		t.Fatal(err)
	}
	if ok, err := Accepts(ctx, s.addr, nil, "new-secret"); err != nil || !ok {
		t.Errorf("after AddPassword as admin the node accepts the new password: %v (%v), want true", ok, err)
	}
	if err := KeepOnlyPassword(ctx, s.addr, nil, admin, "new-secret"); err != nil {
		t.Fatal(err)
	}
	if ok, err := Accepts(ctx, s.addr, nil, "old-secret"); err != nil || ok {
		t.Errorf("after KeepOnlyPassword as admin the node accepts the old password: %v (%v), want false", ok, err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, Username: admin.User, Password: admin.Password})
	defer func() { _ = c.Close() }()
	if got, err := c.ConfigGet(ctx, "masterauth").Result(); err != nil || got["masterauth"] != admin.Password {
		t.Errorf("masterauth is %q (%v), want the admin user's password, unchanged", got["masterauth"], err)
	}
	if err := c.Do(ctx, "ACL", "SETUSER", "default", "on", ">x").Err(); err != nil {
		t.Errorf("the admin user cannot change users: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("the admin user reads keys: %v, want NOPERM", err)
	}
}
