package objectstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// The operator's flags that set an EndpointPolicy, named here so that the messages of a
// refused endpoint and main.go say the same.
const (
	// AllowHTTPFlag lets users name http:// endpoints.
	AllowHTTPFlag = "object-store-allow-http"
	// EndpointsFlag is the comma-separated list of the endpoints users may name.
	EndpointsFlag = "object-store-endpoints"
)

// Why an EndpointPolicy refuses an endpoint, matched with errors.Is.
var (
	// ErrPlainHTTP: the endpoint is http:// and the policy allows HTTPS only.
	ErrPlainHTTP = errors.New("plain HTTP is not allowed")
	// ErrNotAllowed: the endpoint is not in the policy's list.
	ErrNotAllowed = errors.New("endpoint not in the allowed list")
)

// EndpointPolicy is the operator administrator's rule on the object store endpoints that
// users may name: HTTPS only unless AllowHTTP, and, when Allowed is not empty, only those.
// The zero value allows any https:// endpoint. Check it before any request.
type EndpointPolicy struct {
	// AllowHTTP allows http:// endpoints (data and credentials in clear).
	AllowHTTP bool
	// Allowed are the endpoints users may name, as scheme://host[:port] with a lower-case
	// host and without the scheme's default port (NewEndpointPolicy writes them so); empty
	// allows any.
	Allowed []string
}

// NewEndpointPolicy returns the policy of the operator's flags: allowHTTP and the endpoints
// allowed (empty: any). An http:// endpoint in the list without allowHTTP is an error, as is
// an entry that is not scheme://host[:port].
func NewEndpointPolicy(allowHTTP bool, endpoints []string) (EndpointPolicy, error) {
	p := EndpointPolicy{AllowHTTP: allowHTTP}
	for _, e := range endpoints {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		origin, secure, err := canonicalEndpoint(e)
		if err != nil {
			return EndpointPolicy{}, fmt.Errorf("--%s: %w", EndpointsFlag, err)
		}
		if !secure && !allowHTTP {
			return EndpointPolicy{}, fmt.Errorf("--%s lists %s, an http:// endpoint: add --%s to allow plain HTTP, or list its https:// endpoint", EndpointsFlag, e, AllowHTTPFlag)
		}
		if !slices.Contains(p.Allowed, origin) {
			p.Allowed = append(p.Allowed, origin)
		}
	}
	return p, nil
}

// Check returns nil when users may name endpoint, else an error that is ErrPlainHTTP,
// ErrNotAllowed or a malformed endpoint's.
func (p EndpointPolicy) Check(endpoint string) error {
	origin, secure, err := canonicalEndpoint(endpoint)
	switch {
	case err != nil:
		return err
	case !secure && !p.AllowHTTP:
		return ErrPlainHTTP
	case len(p.Allowed) > 0 && !slices.Contains(p.Allowed, origin):
		return ErrNotAllowed
	}
	return nil
}

// canonicalEndpoint is endpoint as scheme://host[:port], the host in lower case and the
// scheme's default port left out, and whether it is HTTPS. A bare host[:port] is HTTPS.
func canonicalEndpoint(endpoint string) (origin string, secure bool, err error) {
	host, secure, err := parseEndpoint(strings.TrimSuffix(endpoint, "/"))
	if err != nil {
		return "", false, err
	}
	scheme, defaultPort := "http", "80"
	if secure {
		scheme, defaultPort = "https", "443"
	}
	u := &url.URL{Scheme: scheme, Host: strings.ToLower(host)}
	if h, port, err := net.SplitHostPort(u.Host); err == nil && port == defaultPort {
		u.Host = h
		if strings.Contains(h, ":") {
			u.Host = "[" + h + "]"
		}
	}
	return u.String(), secure, nil
}
