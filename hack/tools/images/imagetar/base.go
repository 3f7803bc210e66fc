package main

import (
	"archive/tar"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// A base image cannot be pulled without a registry, so each base image the project's
// Dockerfiles name has a stand-in built from scratch here: the files and the settings of the
// base that the image built on it relies on. docs/development/images.md lists what each
// stand-in leaves out.
type base struct {
	// what the stand-in is for, in the layer's history
	name string
	// files the stand-in writes; binaries listed in need come from -base-file
	files func(r rootfs)
	need  []string
	// the base image's settings the Dockerfile inherits
	config v1.Config
}

// defaultPath is distroless's PATH (distroless/static:debug adds /busybox, which the
// stand-in has not).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// distrolessFiles are the files of distroless/static that a static Go program uses: the
// users and groups (root, nobody and nonroot 65532, so a name lookup of the user works and
// the runtime sets HOME), nsswitch.conf, and /tmp with mode 1777.
func distrolessFiles(r rootfs) {
	r.add("/etc/passwd", &entry{typ: tar.TypeReg, mode: 0o644, data: []byte(
		"root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")})
	r.add("/etc/group", &entry{typ: tar.TypeReg, mode: 0o644, data: []byte(
		"root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")})
	r.add("/etc/nsswitch.conf", &entry{typ: tar.TypeReg, mode: 0o644, data: []byte("hosts: files dns\n")})
	r.add("/tmp", &entry{typ: tar.TypeDir, mode: 0o1777})
	r.add("/root", &entry{typ: tar.TypeDir, mode: 0o700})
	r.add("/home/nonroot", &entry{typ: tar.TypeDir, mode: 0o700, uid: 65532, gid: 65532})
}

// baseFor returns the stand-in of the image ref, or nil for scratch.
func baseFor(ref string) (*base, error) {
	repo, tag, _ := strings.Cut(ref, ":")
	switch {
	case ref == "scratch":
		return nil, nil
	case ref == "gcr.io/distroless/static:nonroot":
		// Dockerfile's runtime image.
		return &base{
			name:   ref,
			files:  distrolessFiles,
			config: v1.Config{Env: []string{defaultPath}, User: "65532", WorkingDir: "/home/nonroot"},
		}, nil
	case repo == "quay.io/operator-framework/opm" && tag != "":
		// catalog.Dockerfile's base: operator-registry's release image, distroless/static:debug
		// with opm, grpc_health_probe and nsswitch.conf, run as user 1001.
		return &base{
			name:   ref,
			files:  distrolessFiles,
			need:   []string{"/bin/opm", "/bin/grpc_health_probe"},
			config: v1.Config{Env: []string{defaultPath}, User: "1001", WorkingDir: "/", Entrypoint: []string{"/bin/opm"}},
		}, nil
	}
	return nil, fmt.Errorf("FROM %s: no stand-in for this base image (imagetar knows scratch, "+
		"gcr.io/distroless/static:nonroot and quay.io/operator-framework/opm)", ref)
}
