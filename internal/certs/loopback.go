package certs

import (
	"net"
	"os"
	"path/filepath"
	"time"
)

// Loopback is the TLS material of a server only this machine reaches (the local cluster's
// object store, a test's redis-server): a new CA and a server certificate it signs for
// localhost and 127.0.0.1, written as ca.crt, tls.crt and tls.key (mode 0600) in a directory.
type Loopback struct {
	// CA and Server are the PEM pairs.
	CA, Server Pair
	// CAFile, CertFile and KeyFile are the paths of the written files.
	CAFile, CertFile, KeyFile string
}

// NewLoopback makes the CA (named caName) and the server certificate, valid from now for
// CAValidity and ServerValidity, and writes them into dir, which it creates.
func NewLoopback(dir, caName string, now time.Time) (Loopback, error) {
	ca, err := NewCA(caName, now, CAValidity)
	if err != nil {
		return Loopback{}, err
	}
	server, err := NewServer(ca, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, now, ServerValidity)
	if err != nil {
		return Loopback{}, err
	}
	l := Loopback{CA: ca, Server: server,
		CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Loopback{}, err
	}
	for path, data := range map[string][]byte{l.CAFile: ca.Cert, l.CertFile: server.Cert, l.KeyFile: server.Key} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return Loopback{}, err
		}
	}
	return l, nil
}
