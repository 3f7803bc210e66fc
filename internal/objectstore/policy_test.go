package objectstore

import (
	"errors"
	"strings"
	"testing"
)

// TestEndpointPolicy: HTTPS only unless plain HTTP is allowed; with a list, only its
// endpoints, however a user spells them (case, default port, a trailing slash).
func TestEndpointPolicy(t *testing.T) {
	list := []string{"https://S3.example.com", "https://minio.backup.svc:9000/", " "}
	cases := map[string]struct {
		allowHTTP bool
		allowed   []string
		endpoint  string
		want      error
	}{
		"https, no list":             {endpoint: "https://anything.example:9000"},
		"http refused":               {endpoint: "http://minio.storage:9000", want: ErrPlainHTTP},
		"HTTP in capitals refused":   {endpoint: "HTTP://minio.storage:9000", want: ErrPlainHTTP},
		"http allowed by the flag":   {allowHTTP: true, endpoint: "http://minio.storage:9000"},
		"listed":                     {allowed: list, endpoint: "https://minio.backup.svc:9000"},
		"listed, other spelling":     {allowed: list, endpoint: "https://s3.EXAMPLE.com:443/"},
		"not listed":                 {allowed: list, endpoint: "https://169.254.169.254", want: ErrNotAllowed},
		"listed host, other port":    {allowed: list, endpoint: "https://minio.backup.svc:9001", want: ErrNotAllowed},
		"http of a listed host":      {allowHTTP: true, allowed: list, endpoint: "http://s3.example.com", want: ErrNotAllowed},
		"http refused before a list": {allowed: list, endpoint: "http://s3.example.com", want: ErrPlainHTTP},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := NewEndpointPolicy(tc.allowHTTP, tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Check(tc.endpoint); !errors.Is(err, tc.want) {
				t.Fatalf("Check(%q) = %v, want %v", tc.endpoint, err, tc.want)
			}
		})
	}
}

// TestNewEndpointPolicyRefusesWhatCannotHold: an http:// entry needs the plain HTTP flag,
// and an entry must be an endpoint.
func TestNewEndpointPolicyRefusesWhatCannotHold(t *testing.T) {
	cases := map[string]struct {
		allowHTTP bool
		endpoints []string
		err       string
	}{
		"http without the flag": {endpoints: []string{"http://minio:9000"}, err: "--" + AllowHTTPFlag},
		"a path":                {endpoints: []string{"https://s3.example.com/bucket"}, err: "only scheme, host and port"},
		"another scheme":        {endpoints: []string{"ftp://s3.example.com"}, err: "scheme must be http or https"},
		"http with the flag":    {allowHTTP: true, endpoints: []string{"http://minio:9000"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewEndpointPolicy(tc.allowHTTP, tc.endpoints)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("NewEndpointPolicy: %v, want an error saying %q", err, tc.err)
			}
		})
	}
}
