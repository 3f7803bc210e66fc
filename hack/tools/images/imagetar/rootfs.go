package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// entry is one file, directory or symbolic link of a layer.
type entry struct {
	typ      byte // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode     int64
	uid, gid int
	host     string // a regular file's content comes from this file,
	data     []byte // or is these bytes
	link     string
	implicit bool // a parent directory mkdirAll made
}

// rootfs is the content of one layer, by absolute path.
type rootfs map[string]*entry

// mkdirAll adds p and its missing parents as directories owned by root, mode 0755, as
// docker build creates the parents of a COPY's destination.
func (r rootfs) mkdirAll(p string) {
	for p = path.Clean(p); p != "/"; p = path.Dir(p) {
		if _, ok := r[p]; ok {
			continue
		}
		r[p] = &entry{typ: tar.TypeDir, mode: 0o755, implicit: true}
	}
}

// inherit gives each directory mkdirAll made in r the owner and mode the same directory has
// in the layer below, as docker build leaves an existing directory as it is (/tmp keeps its
// mode 1777 when COPY writes /tmp/cache).
func (r rootfs) inherit(below rootfs) {
	for p, e := range r {
		if b, ok := below[p]; ok && e.implicit && b.typ == tar.TypeDir {
			e.mode, e.uid, e.gid = b.mode, b.uid, b.gid
		}
	}
}

// add adds e at p, with its parents.
func (r rootfs) add(p string, e *entry) {
	p = path.Clean(p)
	r.mkdirAll(path.Dir(p))
	r[p] = e
}

// isDir tells whether p is a directory in r or in the layers below it.
func isDir(p string, layers ...rootfs) bool {
	p = path.Clean(p)
	if p == "/" {
		return true
	}
	for _, r := range layers {
		if e, ok := r[p]; ok && e.typ == tar.TypeDir {
			return true
		}
	}
	return false
}

// copyHost copies the host file or tree src to dst, owned by uid:gid. With normalize, the
// modes are those of a fresh checkout (0755 for directories and executables, 0644 for other
// files), so the umask of the machine does not change the image; without, the host's modes
// are kept (what a builder stage wrote, such as opm's cache).
func (r rootfs) copyHost(src, dst string, uid, gid int, normalize bool) error {
	src, err := filepath.EvalSymlinks(src) // bin/opm is a link into the tools cache
	if err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := int64(info.Mode().Perm())
		if info.Mode()&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		e := &entry{uid: uid, gid: gid, mode: mode}
		switch {
		case d.IsDir():
			e.typ = tar.TypeDir
			if normalize {
				e.mode = 0o755
			}
		case info.Mode().IsRegular():
			e.typ, e.host = tar.TypeReg, p
			if normalize {
				e.mode = 0o644
				if info.Mode().Perm()&0o111 != 0 {
					e.mode = 0o755
				}
			}
		case info.Mode()&fs.ModeSymlink != 0:
			e.typ, e.mode = tar.TypeSymlink, 0o777
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: only files, directories and symbolic links can be copied", p)
		}
		r.add(target, e)
		return nil
	})
}

// writeTar writes r as a tar stream, in path order, every time stamp at mtime.
func (r rootfs) writeTar(w io.Writer, mtime time.Time) error {
	paths := make([]string, 0, len(r))
	for p := range r {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		e := r[p]
		h := &tar.Header{
			Typeflag: e.typ,
			Name:     strings.TrimPrefix(p, "/"),
			Mode:     e.mode,
			Uid:      e.uid,
			Gid:      e.gid,
			ModTime:  mtime,
			Linkname: e.link,
		}
		if err := writeEntry(tw, h, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeEntry writes one header and, for a regular file, its content.
func writeEntry(tw *tar.Writer, h *tar.Header, e *entry) error {
	switch e.typ {
	case tar.TypeDir:
		h.Name += "/"
	case tar.TypeReg:
		if e.host == "" {
			h.Size = int64(len(e.data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := tw.Write(e.data)
			return err
		}
		f, err := os.Open(e.host)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		h.Size = info.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if n, err := io.Copy(tw, f); err != nil {
			return err
		} else if n != h.Size {
			return fmt.Errorf("%s changed while it was copied", e.host)
		}
		return nil
	}
	return tw.WriteHeader(h)
}
