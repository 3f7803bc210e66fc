// Package backupstore is where backups live, as the Redis controllers see it: the operator's
// policy on the object store endpoints users name (CheckEndpoint), the opener of those stores
// with the credentials and CA of the Secrets they name (Opener), the naming of a backup's
// folder and of a location (Folder, Location), a manifest's slot ranges as package nodes'
// (Ranges), and the back-off of the steps that fail against a store (Failures, Backoff).
package backupstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// The keys of an object store's Secrets.
const (
	// StoreAccessKeyIDKey, StoreSecretAccessKeyKey and StoreSessionTokenKey are the keys of
	// spec.destination.credentialsSecret (and of a restore source's).
	StoreAccessKeyIDKey     = "accessKeyId"
	StoreSecretAccessKeyKey = "secretAccessKey"
	StoreSessionTokenKey    = "sessionToken"
	// StoreCAKey is the key of a caSecret.
	StoreCAKey = "ca.crt"
)

// backupPartSize is the part size of a shard's multipart upload.
const backupPartSize = 8 << 20

// errStoreConfig marks a problem of the object store's configuration a user must fix (a
// missing Secret or key), as opposed to the store's answer.
var errStoreConfig = errors.New("object store configuration")

// ErrEndpointRefused marks an endpoint the operator's EndpointPolicy refuses: no request
// went to it, and none will until the spec or the operator's flags change.
var ErrEndpointRefused = errors.New("object store endpoint refused")

// ReasonEndpointRefused is the reason of the condition and the event of a backup, schedule
// or restore whose object store endpoint the operator's flags do not allow.
const ReasonEndpointRefused = "EndpointRefused"

// CheckEndpoint returns nil when policy allows the endpoint of the field named field (as
// spec.destination.endpoint), else an ErrEndpointRefused error that names the field and
// the fix.
func CheckEndpoint(policy objectstore.EndpointPolicy, field, endpoint string) error {
	err := policy.Check(endpoint)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objectstore.ErrPlainHTTP):
		return fmt.Errorf("%w: %s %s is plain HTTP, which would carry the data and the store's credentials in clear: "+
			"use the store's https:// endpoint, or have the operator started with --%s", ErrEndpointRefused, field, endpoint, objectstore.AllowHTTPFlag)
	case errors.Is(err, objectstore.ErrNotAllowed):
		return fmt.Errorf("%w: %s %s is not an endpoint the operator may reach: use one of %s, or have the operator's --%s list it",
			ErrEndpointRefused, field, endpoint, strings.Join(policy.Allowed, ", "), objectstore.EndpointsFlag)
	}
	return fmt.Errorf("%w: %s: %w", ErrEndpointRefused, field, err)
}

// Opener opens the object stores users name, under the operator's EndpointPolicy.
type Opener struct {
	// Reader reads the Secrets a store names: the API server's reader, as they are read
	// once per backup or restore, not watched.
	Reader client.Reader
	// Policy says which endpoints may be opened.
	Policy objectstore.EndpointPolicy
}

// Open returns a client for the folder dir of store, whose endpoint is the field named
// field, once the policy allows the endpoint (ErrEndpointRefused otherwise, before any
// request), with the credentials (and CA) of the Secrets it names in namespace, read
// straight from the API server: they are read once per backup or restore, not watched.
func (o Opener) Open(ctx context.Context, field, namespace string, store redisv1alpha1.ObjectStore, dir string) (*objectstore.Client, error) {
	if err := CheckEndpoint(o.Policy, field, store.Endpoint); err != nil {
		return nil, err
	}
	reader := o.Reader
	creds := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: store.CredentialsSecret}, creds); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: the credentials Secret %s does not exist: create it with the keys %s and %s",
				errStoreConfig, store.CredentialsSecret, StoreAccessKeyIDKey, StoreSecretAccessKeyKey)
		}
		return nil, fmt.Errorf("while reading the credentials Secret %s: %w", store.CredentialsSecret, err)
	}
	for _, k := range []string{StoreAccessKeyIDKey, StoreSecretAccessKeyKey} {
		if len(creds.Data[k]) == 0 {
			return nil, fmt.Errorf("%w: the credentials Secret %s has no key %s: add it", errStoreConfig, store.CredentialsSecret, k)
		}
	}
	cfg := objectstore.Config{
		Endpoint: strings.TrimSuffix(store.Endpoint, "/"), Bucket: store.Bucket, Prefix: dir, Region: store.Region,
		AccessKey: string(creds.Data[StoreAccessKeyIDKey]), SecretKey: string(creds.Data[StoreSecretAccessKeyKey]),
		SessionToken: string(creds.Data[StoreSessionTokenKey]),
		// A backup uploads every shard at once, each holding Concurrency parts in memory:
		// 8 MiB parts keep that at 16 MiB a shard and still store 80 GiB a shard.
		PartSize: backupPartSize,
	}
	if store.CASecret != "" {
		ca := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: store.CASecret}, ca); err != nil {
			return nil, fmt.Errorf("%w: while reading the CA Secret %s: %w", errStoreConfig, store.CASecret, err)
		}
		if cfg.CA = ca.Data[StoreCAKey]; len(cfg.CA) == 0 {
			return nil, fmt.Errorf("%w: the CA Secret %s has no key %s: add the PEM bundle there", errStoreConfig, store.CASecret, StoreCAKey)
		}
	}
	c, err := objectstore.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStoreConfig, err)
	}
	return c, nil
}

// Folder is the folder of a RedisBackup in its destination's bucket:
// <path>/<backup name>, with <path> defaulting to <namespace>/<cluster>.
func Folder(b *redisv1alpha1.RedisBackup) string {
	dir := strings.Trim(b.Spec.Destination.Path, "/")
	if dir == "" {
		dir = path.Join(b.Namespace, b.Spec.Cluster)
	}
	return path.Join(dir, b.Name)
}

// Location is a folder as s3://bucket/folder, for the status and messages.
func Location(store redisv1alpha1.ObjectStore, dir string) string {
	return (&url.URL{Scheme: "s3", Host: store.Bucket, Path: "/" + strings.Trim(dir, "/")}).String()
}

// Ranges are a manifest's slot ranges as package nodes'.
func Ranges(ranges []backup.SlotRange) []nodes.SlotRange {
	out := make([]nodes.SlotRange, len(ranges))
	for i, rg := range ranges {
		out[i] = nodes.SlotRange{Start: rg.Start, End: rg.End}
	}
	return out
}
