// Package conn holds the pooled, authenticated, counted connections to a Redis Cluster's
// nodes and the one-command helpers on them: the Pool (one client per node address, kept
// from one look to the next), the Login it authenticates with, a fresh authenticated Dial,
// CONFIG SET, and the Command a recovery runs.
//
// It sits on floor 1 of internal/rediscluster and imports only nodes, for the CLUSTER NODES
// and CLUSTER INFO it parses. No error it returns carries a password (Redact).
package conn
