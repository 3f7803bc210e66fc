//go:build tools

// Package tools pins versitygw, the Versity S3 Gateway: the S3-compatible object store the
// local cluster runs (posix backend) for backups (see docs/development/object-store.md).
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
