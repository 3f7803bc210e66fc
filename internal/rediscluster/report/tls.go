package report

import "crypto/x509"

// UnnamedHosts are the hosts cert does not name (all of them when it is nil): a client
// outside that dials one of them and verifies the host refuses it.
func UnnamedHosts(cert *x509.Certificate, hosts []string) []string {
	var out []string
	for _, host := range hosts {
		if cert == nil || cert.VerifyHostname(host) != nil {
			out = append(out, host)
		}
	}
	return out
}
