// Package objectstore reads and writes backup files in an S3-compatible object store (AWS S3,
// MinIO, Ceph RGW, SeaweedFS, the Versity gateway the local cluster runs...) through
// minio-go.
//
// Every transfer streams: Put reads its source once, in parts of a bounded size, and computes
// the SHA-256 of what it sent on the way; Get writes to its destination as it reads and
// checks the size and SHA-256 the caller expects when the last byte has arrived. So the
// memory a transfer takes does not grow with the object, and a caller records the digest
// Put returns (in a backup's manifest) to check the object when it is read back.
//
// Object names are relative to the configured prefix: a Client for prefix "prod/redis"
// stores the name "cache/0.rdb" as the key "prod/redis/cache/0.rdb" and lists it back as
// "cache/0.rdb". Errors the caller acts on are classified (ErrNotFound, ErrNoBucket,
// ErrAccessDenied, ErrChecksum) and keep the store's own message.
package objectstore
