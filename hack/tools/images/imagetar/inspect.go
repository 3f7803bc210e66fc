package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// report is what inspect prints.
type report struct {
	RepoTags     []string  `json:"repoTags"`
	Digest       string    `json:"digest"`
	MediaType    string    `json:"mediaType"`
	OS           string    `json:"os"`
	Architecture string    `json:"architecture"`
	Layers       int       `json:"layers"`
	Config       v1.Config `json:"config"`
	Files        []file    `json:"files"`
}

type file struct {
	Path string `json:"path"`
	Type string `json:"type"` // dir, file, symlink, hardlink or the tar type flag
	Mode int64  `json:"mode"` // permission bits with setuid, setgid and sticky
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Size int64  `json:"size,omitempty"`
	Link string `json:"link,omitempty"`
}

// inspect reads the image tarball at p with go-containerregistry's tarball reader and
// reports it; with extract, it writes the image's flattened file system there (modes with
// the owner's read and write bits added, owners not kept).
func inspect(p, extract string, w io.Writer) error {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(p) })
	if err != nil {
		return err
	}
	if len(m) != 1 {
		return fmt.Errorf("%s holds %d images, want 1", p, len(m))
	}
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	r := report{RepoTags: m[0].RepoTags, Digest: digest.String(), MediaType: string(mt), OS: cf.OS,
		Architecture: cf.Architecture, Layers: len(layers), Config: cf.Config}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + h.Name) // rooted, so no .. leaves an -extract directory
		typ, ok := tarTypes[h.Typeflag]
		if !ok {
			typ = string(h.Typeflag)
		}
		r.Files = append(r.Files, file{Path: name, Type: typ, Mode: h.Mode & 0o7777, UID: h.Uid, GID: h.Gid, Size: h.Size, Link: h.Linkname})
		if extract != "" {
			if err := extractEntry(extract, name, h, tr); err != nil {
				return err
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func extractEntry(dir, name string, h *tar.Header, r io.Reader) error {
	target := filepath.Join(dir, filepath.FromSlash(name))
	switch h.Typeflag {
	case tar.TypeDir:
		return os.MkdirAll(target, os.FileMode(h.Mode&0o777)|0o700)
	case tar.TypeReg:
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode&0o777)|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.Symlink(h.Linkname, target)
	}
	return nil
}
