package redis

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ensurePassword reads the user's password Secret, or keeps (creating it once) the
// generated one. The password is never logged, evented or put in the status.
func (r *RedisClusterReconciler) ensurePassword(ctx context.Context, s *state) (*ctrl.Result, error) {
	rc := s.rc
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisPasswordSecretName(rc)}
	if rc.Spec.PasswordSecret != "" {
		if s.password != "" { // readPassword found it
			return nil, nil
		}
		secret := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, key, secret); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("spec.passwordSecret: Secret %q not found: create it with a %q key", key.Name, resources.RedisPasswordKey)
			}
			return nil, fmt.Errorf("while reading Secret %s: %w", key.Name, err)
		}
		if len(secret.Data[resources.RedisPasswordKey]) == 0 {
			return nil, fmt.Errorf("spec.passwordSecret: Secret %q has no %q key", key.Name, resources.RedisPasswordKey)
		}
		s.password = string(secret.Data[resources.RedisPasswordKey])
		return nil, nil
	}
	kept, err := child.KeptSecretValue(ctx, r.Client, rc, key, resources.RedisPasswordKey)
	if err != nil {
		return nil, err
	}
	if kept == nil && len(s.recorded) > 0 {
		// The nodes run with the lost password: a new one would lock the operator out and
		// break replication for every pod restarted later.
		return nil, &passwordLostError{secret: key.Name}
	}
	if kept == nil {
		if kept, err = child.NewPassword(); err != nil {
			return nil, err
		}
	}
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, rc, resources.RedisPasswordSecret(rc, string(kept)),
		child.MergeSecretKeeping(resources.RedisPasswordKey))
	r.record(s, live, outcome, err)
	if err != nil {
		return nil, err
	}
	s.password = string(live.Data[resources.RedisPasswordKey])
	return nil, nil
}

// passwordLostError: the generated password Secret (or with users the users Secret) of a
// formed cluster is gone.
type passwordLostError struct {
	secret string
	users  bool
}

func (e *passwordLostError) Error() string {
	if e.users {
		return fmt.Sprintf("the users Secret %q of a formed cluster was deleted, and the operator does not generate new passwords over running nodes: "+
			"recreate it with the passwords the nodes run with (keys %q and %q), or create a new RedisCluster", e.secret, resources.RedisUsersOperatorKey, resources.RedisUsersExporterKey)
	}
	return fmt.Sprintf("the password Secret %q of a formed cluster was deleted, and the operator does not generate a new password over running nodes: "+
		"create a Secret of your own with the password the nodes run with (key %q) and name it in spec.passwordSecret", e.secret, resources.RedisPasswordKey)
}

// ensureConfigMap writes redis.conf, merging the user's ConfigMap (spec.pod[0].configmap).
func (r *RedisClusterReconciler) ensureConfigMap(ctx context.Context, s *state) (*ctrl.Result, error) {
	userConf := ""
	if name := resources.RedisPodSpec(s.rc).Configmap; name != "" {
		cm := &corev1.ConfigMap{} // the user's: not in the cache, which holds only the operator's own
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("spec.pod[0].configmap: ConfigMap %q not found: create it with a %q key or remove the field", name, resources.RedisUserConfigKey)
			}
			return nil, fmt.Errorf("while reading ConfigMap %s: %w", name, err)
		}
		userConf = cm.Data[resources.RedisUserConfigKey]
		if conflict := resources.RedisUserConfConflict(s.rc, userConf); conflict != "" {
			return nil, errors.New(conflict)
		}
	}
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisConfigMap(s.rc, userConf), child.MergeConfigMap)
	r.record(s, live, outcome, err)
	return nil, err
}

func (r *RedisClusterReconciler) ensureServices(ctx context.Context, s *state) (*ctrl.Result, error) {
	for _, svc := range []*corev1.Service{resources.RedisHeadlessService(s.rc), resources.RedisClientService(s.rc)} {
		live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, svc, child.MergeService)
		r.record(s, live, outcome, err)
		if err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (r *RedisClusterReconciler) ensurePodDisruptionBudget(ctx context.Context, s *state) (*ctrl.Result, error) {
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisPodDisruptionBudget(s.rc), child.MergePodDisruptionBudget)
	r.record(s, live, outcome, err)
	return nil, err
}

// readPassword reads the password of an existing Secret without changing anything, so a
// paused cluster's status can still be read from Redis. A user's Secret is read through the
// API reader: the cache holds only the operator's own Secrets.
func (r *RedisClusterReconciler) readPassword(ctx context.Context, s *state) (*ctrl.Result, error) {
	var reader client.Reader = r.Client
	if s.rc.Spec.PasswordSecret != "" {
		reader = r.APIReader
	}
	secret := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisPasswordSecretName(s.rc)}, secret)
	if err == nil {
		s.password = string(secret.Data[resources.RedisPasswordKey])
	}
	return nil, client.IgnoreNotFound(err)
}

// pauseGate stops the pipeline while spec.pause is true: the operator creates and changes
// nothing, neither Kubernetes objects nor the Redis topology. The status is still read.
func (r *RedisClusterReconciler) pauseGate(_ context.Context, s *state) (*ctrl.Result, error) {
	if !s.rc.Spec.Pause {
		return nil, nil
	}
	return &ctrl.Result{RequeueAfter: healthInterval}, nil
}

// ensureStatefulSet creates the StatefulSet with spec.replicas pods and keeps its template
// current. Pods are added at once on scale out; on scale in the StatefulSet keeps its pods
// until their slots are moved and their nodes removed from the cluster. A template change
// restarts no pod by itself (OnDelete): upgradePods replaces them one at a time.
func (r *RedisClusterReconciler) ensureStatefulSet(ctx context.Context, s *state) (*ctrl.Result, error) {
	replicas := s.rc.Spec.Replicas
	live := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: s.rc.Name}, live)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("while reading StatefulSet %s: %w", s.rc.Name, err)
	}
	if err == nil && live.Spec.Replicas != nil && *live.Spec.Replicas > replicas {
		// Scale in shrinks the StatefulSet only after the leaving nodes are out of the
		// cluster (removeLeavingNodes).
		replicas = *live.Spec.Replicas
	}
	sts, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisStatefulSet(s.rc, replicas), child.MergeStatefulSet)
	r.record(s, sts, outcome, err)
	if err != nil {
		return nil, err
	}
	s.sts = sts
	return nil, nil
}

// record emits the events of a child's outcome (see child.RecordOutcome).
func (r *RedisClusterReconciler) record(s *state, live client.Object, outcome child.Outcome, err error) {
	child.RecordOutcome(r.Recorder, s.rc, s.rc.Status.Conditions, live, outcome, err)
}
