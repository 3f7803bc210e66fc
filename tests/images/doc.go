// Package images tests the image tarballs `make images` builds without a container engine:
// the operator, bundle and catalog images, read back with go-containerregistry's tarball
// reader (bin/imagetar inspect) and checked against Dockerfile, bundle.Dockerfile,
// bundle/metadata/annotations.yaml and catalog.Dockerfile.
package images
