// Package kubectlplugin is the kubectl plugin kubectl-middleware: status of a RedisCluster,
// AppService or CloudManager on one screen, a RedisBackup taken now, the RedisCluster that
// restores a backup, and a redacted archive for a bug report. The formatting is pure (a
// view in, text out) and table-tested; the loaders read the API server only, never Redis.
package kubectlplugin
