package credentials

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// WriteRecord writes a credential's applied-password record as the planner's
// StepWriteRecord says.
func (k *Keeper) WriteRecord(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, step plan.Step) error {
	c, rec := f.list(rc)[step.Credential], step.Record
	return k.writeApplied(ctx, rc, c, rec.Current, rec.Previous, rec.SwitchedAt)
}

// AddPassword carries out StepAddPassword: every running node of step.Addrs accepts the
// credential's new password besides the current one, and the user replicas authenticate as
// uses it with their masters (execute.AddPassword, over trust); once every one has, the
// record says so and the grace period starts. A node that does not answer is waited for.
// step.Rotation says what the rotation waits for.
func (k *Keeper) AddPassword(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, step *plan.Step, trust *tls.Config) error {
	c := f.list(rc)[step.Credential]
	current, previous := string(c.applied.Data[resources.RedisPasswordKey]), string(c.applied.Data[resources.RedisPreviousPasswordKey])
	change := f.passwordChange(rc, c, []string{current, previous, c.desired})
	var missing []string
	for _, addr := range step.Addrs {
		if silent, err := rotationStep(execute.AddPassword(ctx, addr, trust, change)); err != nil {
			return fmt.Errorf("while adding the new password of Secret %s (user %s): %w", c.source, c.user, err)
		} else if silent {
			missing = append(missing, addr)
		}
	}
	prefix := fmt.Sprintf("rotating user %s to the password of Secret %s: ", c.user, c.source)
	if len(missing) > 0 {
		step.Rotation = prefix + fmt.Sprintf("%d nodes accept it; waiting for %s to answer", len(step.Addrs)-len(missing), strings.Join(missing, ", "))
		return nil
	}
	now := time.Now()
	if err := k.writeApplied(ctx, rc, c, c.desired, current, now); err != nil {
		return err
	}
	k.Recorder.Eventf(rc, nil, corev1.EventTypeNormal, "PasswordRotating", "Rotate",
		"every node accepts the new password of user %s from Secret %s; the previous password stops working after %s", c.user, c.source, k.grace())
	step.Rotation = prefix + "every node accepts both passwords until " + now.Add(k.grace()).UTC().Format(time.RFC3339)
	return nil
}

// KeepOnlyPassword carries out StepKeepOnlyPassword: every running node of step.Addrs
// refuses the credential's previous password (execute.KeepOnlyPassword), none accepts it
// any more (checked), and the record says that the rotation is over. step.Rotation says
// what it waits for.
func (k *Keeper) KeepOnlyPassword(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, step *plan.Step, trust *tls.Config) error {
	c := f.list(rc)[step.Credential]
	previous := string(c.applied.Data[resources.RedisPreviousPasswordKey])
	change := f.passwordChange(rc, c, []string{c.desired, previous})
	var missing []string
	for _, addr := range step.Addrs {
		if silent, err := rotationStep(execute.KeepOnlyPassword(ctx, addr, trust, change)); err != nil {
			return fmt.Errorf("while retiring the previous password of user %s: %w", c.user, err)
		} else if silent {
			missing = append(missing, addr)
		}
	}
	if len(missing) > 0 {
		step.Rotation = fmt.Sprintf("rotating user %s to the password of Secret %s: waiting for %s to answer before the previous password is retired",
			c.user, c.source, strings.Join(missing, ", "))
		return nil
	}
	for _, addr := range step.Addrs {
		ok, err := conn.Accepts(ctx, addr, trust, conn.Login{User: c.user, Password: previous})
		if err != nil {
			return fmt.Errorf("while checking that the previous password of user %s was retired: %w", c.user, err)
		}
		if ok {
			return fmt.Errorf("the node at %s still accepts the previous password of user %s after it was retired", addr, c.user)
		}
	}
	if err := k.writeApplied(ctx, rc, c, c.desired, "", time.Time{}); err != nil {
		return err
	}
	k.Recorder.Eventf(rc, nil, corev1.EventTypeNormal, "PasswordRotated", "Rotate",
		"every node requires the password of user %s from Secret %s; the previous password no longer works", c.user, c.source)
	return nil
}

// passwordChange is the step that moves c to its desired password: as c's user itself with
// the first of own its node accepts, or with ACL users as the operator's user.
func (f *Facts) passwordChange(rc *redisv1alpha1.RedisCluster, c credential, own []string) execute.PasswordChange {
	change := execute.PasswordChange{User: c.user, AsPasswords: own, New: c.desired, MasterAuth: c.masterAuth}
	if resources.RedisACLEnabled(rc) {
		change.As = resources.RedisOperatorUser
		if c.user != resources.RedisOperatorUser {
			change.AsPasswords = f.OperatorPasswords
		}
	}
	return change
}

// rotationStep sorts the outcome of a rotation step on one node: a node that refuses every
// password offered is an error (it runs a password the operator never knew); one that does
// not answer (starting, held by its start guard, down) is silent, waited for without
// stopping the healing steps after this one.
func rotationStep(err error) (silent bool, _ error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, conn.ErrWrongPassword):
		return false, err
	default:
		return true, nil
	}
}

// writeApplied creates or updates c's applied-password record (c.applied as read).
func (k *Keeper) writeApplied(ctx context.Context, rc *redisv1alpha1.RedisCluster, c credential, password, previous string, switchedAt time.Time) error {
	desired := resources.RedisAppliedPasswordSecret(rc, c.record, password, previous, switchedAt)
	if err := controllerutil.SetControllerReference(rc, desired, k.Scheme); err != nil {
		return err
	}
	if c.applied == nil {
		if err := k.Client.Create(ctx, desired); err != nil {
			return fmt.Errorf("while creating Secret %s: %w", desired.Name, err)
		}
		return nil
	}
	live := c.applied.DeepCopy()
	live.Data, live.Annotations = desired.Data, desired.Annotations
	if err := k.Client.Update(ctx, live); err != nil {
		return fmt.Errorf("while updating Secret %s: %w", desired.Name, err)
	}
	return nil
}
