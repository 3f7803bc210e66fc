package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// DefaultPasswordGrace is how long both passwords work during a rotation: longer than a
// kubelet takes to refresh a changed Secret volume (its sync period plus its cache TTL, a
// minute each by default), so every pod's readiness probe reads the new password before
// the old one stops working.
const DefaultPasswordGrace = 2 * time.Minute

// rotatePassword brings the nodes to the password of the password Secret when it differs
// from the one they run with (recorded in the applied-password Secret), without downtime:
// first every node accepts both and authenticates to its master with the new one
// (redisadmin.AddPassword); after the grace period every node keeps only the new one
// (redisadmin.KeepOnlyPassword), which is verified, and the record is updated. Each stage
// needs every pod to answer; until then it waits and says so. When the passwords agree it
// reads one cached Secret and changes nothing.
func (r *RedisClusterReconciler) rotatePassword(ctx context.Context, s *state) (*ctrl.Result, error) {
	if s.password == "" {
		return nil, nil
	}
	applied := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisAppliedPasswordSecretName(s.rc)}
	if err := r.Get(ctx, key, applied); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("while reading Secret %s: %w", key.Name, err)
		}
		// A new cluster, or one formed before rotations: its nodes run the Secret's password.
		s.rotation = rotationCurrent
		return nil, r.writeApplied(ctx, s, nil, s.password, "", time.Time{})
	}
	current := string(applied.Data[resources.RedisPasswordKey])
	previous := string(applied.Data[resources.RedisPreviousPasswordKey])
	secretName := resources.RedisPasswordSecretName(s.rc)
	if !bytes.Equal(applied.Data[resources.RedisExporterPasswordFileKey], resources.RedisExporterPasswordJSON(current)) {
		// Recorded by an operator from before the exporter's password file: add it, as it
		// is (the exporter sidecars of the new pod template mount it), and go on next time.
		switched, _ := time.Parse(time.RFC3339, applied.Annotations[resources.RedisPasswordSwitchedAnnotation])
		return nil, r.writeApplied(ctx, s, applied, current, previous, switched)
	}
	switch {
	case current == s.password && previous == "":
		s.rotation = rotationCurrent
		return nil, nil
	case current != s.password:
		addrs, missing, err := r.runningAddrs(ctx, s)
		if err != nil {
			return nil, err
		}
		if err := r.fence(ctx); err != nil {
			return nil, err
		}
		accepted := 0
		for _, addr := range addrs {
			if silent, err := rotationStep(redisadmin.AddPassword(ctx, addr, s.tls, s.rotationLogin(), []string{current, previous, s.password}, s.password)); err != nil {
				return nil, fmt.Errorf("while adding the new password of Secret %s: %w", secretName, err)
			} else if silent {
				missing = append(missing, addr)
				continue
			}
			accepted++
		}
		if len(missing) > 0 {
			s.rotation = fmt.Sprintf("rotating to the password of Secret %s: %d nodes accept it; waiting for %s to answer", secretName, accepted, strings.Join(missing, ", "))
			return nil, nil
		}
		now := time.Now()
		if err := r.writeApplied(ctx, s, applied, s.password, current, now); err != nil {
			return nil, err
		}
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "PasswordRotating", "Rotate",
			"every node accepts the new password of Secret %s and uses it with its master; the previous password stops working after %s", secretName, r.passwordGrace())
		s.rotation = fmt.Sprintf("rotating to the password of Secret %s: every node accepts both passwords until %s", secretName, now.Add(r.passwordGrace()).UTC().Format(time.RFC3339))
		return nil, nil
	}
	// Every node accepts both: after the grace period, retire the previous password.
	switched, _ := time.Parse(time.RFC3339, applied.Annotations[resources.RedisPasswordSwitchedAnnotation])
	if until := switched.Add(r.passwordGrace()); time.Now().Before(until) {
		s.rotation = fmt.Sprintf("rotating to the password of Secret %s: every node accepts both passwords until %s", secretName, until.UTC().Format(time.RFC3339))
		return nil, nil
	}
	addrs, missing, err := r.runningAddrs(ctx, s)
	if err != nil {
		return nil, err
	}
	if err := r.fence(ctx); err != nil {
		return nil, err
	}
	for _, addr := range addrs {
		if silent, err := rotationStep(redisadmin.KeepOnlyPassword(ctx, addr, s.tls, s.rotationLogin(), s.password)); err != nil {
			return nil, fmt.Errorf("while retiring the previous password: %w", err)
		} else if silent {
			missing = append(missing, addr)
		}
	}
	if len(missing) > 0 {
		s.rotation = fmt.Sprintf("rotating to the password of Secret %s: waiting for %s to answer before the previous password is retired", secretName, strings.Join(missing, ", "))
		return nil, nil
	}
	for _, addr := range addrs {
		ok, err := redisadmin.Accepts(ctx, addr, s.tls, previous)
		if err != nil {
			return nil, fmt.Errorf("while checking that the previous password was retired: %w", err)
		}
		if ok {
			return nil, fmt.Errorf("the node at %s still accepts the previous password after it was retired", addr)
		}
	}
	if err := r.writeApplied(ctx, s, applied, s.password, "", time.Time{}); err != nil {
		return nil, err
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "PasswordRotated", "Rotate",
		"every node requires the password of Secret %s; the previous password no longer works", secretName)
	s.rotation = rotationCurrent
	return nil, nil
}

// rotationStep sorts the outcome of a rotation step on one node: a node that refuses every
// password offered is an error (it runs a password the operator never knew); one that does
// not answer (starting, held by its start guard, down) is silent, waited for without
// stopping the healing steps after this one.
func rotationStep(err error) (silent bool, _ error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, redisadmin.ErrWrongPassword):
		return false, err
	default:
		return true, nil
	}
}

// rotationCurrent is state.rotation when the nodes run exactly the Secret's password.
const rotationCurrent = "current"

func (r *RedisClusterReconciler) passwordGrace() time.Duration {
	if r.PasswordGrace > 0 {
		return r.PasswordGrace
	}
	return DefaultPasswordGrace
}

// runningAddrs lists the addresses of the cluster's running pods and the names of the pods
// the StatefulSet wants that do not run.
func (r *RedisClusterReconciler) runningAddrs(ctx context.Context, s *state) (addrs, missing []string, err error) {
	if err := r.listPods(ctx, s); err != nil {
		return nil, nil, err
	}
	running := map[string]bool{}
	for i := range s.pods {
		p := &s.pods[i]
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			addrs = append(addrs, podAddr(p))
			running[p.Name] = true
		}
	}
	if s.sts != nil && s.sts.Spec.Replicas != nil {
		for i := range int(*s.sts.Spec.Replicas) {
			if name := fmt.Sprintf("%s-%d", s.sts.Name, i); !running[name] {
				missing = append(missing, name)
			}
		}
	}
	return addrs, missing, nil
}

// writeApplied creates or updates the applied-password record.
func (r *RedisClusterReconciler) writeApplied(ctx context.Context, s *state, live *corev1.Secret, password, previous string, switchedAt time.Time) error {
	desired := resources.RedisAppliedPasswordSecret(s.rc, password, previous, switchedAt)
	if err := controllerutil.SetControllerReference(s.rc, desired, r.Scheme); err != nil {
		return err
	}
	if live == nil {
		if err := r.Create(ctx, desired); err != nil {
			return fmt.Errorf("while creating Secret %s: %w", desired.Name, err)
		}
		return nil
	}
	live = live.DeepCopy()
	live.Data, live.Annotations = desired.Data, desired.Annotations
	if err := r.Update(ctx, live); err != nil {
		return fmt.Errorf("while updating Secret %s: %w", desired.Name, err)
	}
	return nil
}
