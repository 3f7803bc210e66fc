package execute

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// ServesCertificate reports whether the node at addr presents certDER (the DER bytes of a
// certificate) in a TLS handshake verified with tlsConfig.
func ServesCertificate(ctx context.Context, addr string, tlsConfig *tls.Config, certDER []byte) (bool, error) {
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: tlsConfig}
	tlsConn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("while opening a TLS connection to %s: %w", addr, err)
	}
	defer func() { _ = tlsConn.Close() }()
	peers := tlsConn.(*tls.Conn).ConnectionState().PeerCertificates //nolint:forcetypeassert // tls.Dialer returns *tls.Conn
	return len(peers) > 0 && bytes.Equal(peers[0].Raw, certDER), nil
}

// ReloadTLS makes the node at addr read its certificate, key and CA files again (CONFIG SET
// tls-cert-file with the file it already names: Redis rebuilds its TLS context on any TLS
// setting), so a renewed certificate takes effect without a restart. Connections already
// open keep the old one; the node refuses the reload, keeping its current certificate, when
// the files do not form a valid pair.
func ReloadTLS(ctx context.Context, addr string, tlsConfig *tls.Config, login conn.Login, certFile string) error {
	c, err := conn.Dial(ctx, addr, tlsConfig, login.User, []string{login.Password})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.ConfigSet(ctx, "tls-cert-file", certFile).Err(); err != nil {
		return fmt.Errorf("while reloading the TLS certificate of %s: %w", addr, err)
	}
	return nil
}
