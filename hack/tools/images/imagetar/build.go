package main

import (
	"archive/tar"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildOptions are the inputs of one image.
type buildOptions struct {
	dockerfile string
	context    string
	// stageFiles maps "stage:/path" of a COPY --from to the host file or tree that holds what
	// the builder stage would have made there.
	stageFiles map[string]string
	// baseFiles maps a path of the base image's stand-in (/bin/opm) to its host file.
	baseFiles map[string]string
	platform  v1.Platform
	tag       string
	out       string
	mtime     time.Time
}

// image is what the final stage of a Dockerfile makes: the stand-in of its base, then one
// layer with what its COPY and ADD instructions copy, and the settings of its ENTRYPOINT,
// CMD, USER, WORKDIR, ENV, LABEL, EXPOSE, STOPSIGNAL and VOLUME.
type image struct {
	opts    buildOptions
	base    *base
	baseFS  rootfs
	fs      rootfs
	config  v1.Config
	history []string
}

func build(opts buildOptions) error {
	text, err := os.ReadFile(opts.dockerfile)
	if err != nil {
		return err
	}
	stages, err := parseDockerfile(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", opts.dockerfile, err)
	}
	final := stages[len(stages)-1]
	im := &image{opts: opts, baseFS: rootfs{}, fs: rootfs{}}
	if im.base, err = baseFor(final.from); err != nil {
		return fmt.Errorf("%s: %w", opts.dockerfile, err)
	}
	if im.base != nil {
		im.base.files(im.baseFS)
		for _, p := range im.base.need {
			host, ok := opts.baseFiles[p]
			if !ok {
				return fmt.Errorf("%s: the stand-in for %s needs %s: give it with -base-file %s=<host file>", opts.dockerfile, final.from, p, p)
			}
			if err := im.baseFS.copyHost(host, p, 0, 0, false); err != nil {
				return err
			}
		}
		im.config = im.base.config
		im.config.Env = append([]string(nil), im.base.config.Env...)
		im.config.Entrypoint = append([]string(nil), im.base.config.Entrypoint...)
	}
	if im.config.WorkingDir == "" {
		im.config.WorkingDir = "/"
	}
	cmdSet := false
	for _, in := range final.ins {
		if strings.Contains(in.args, "$") && in.cmd != "LABEL" {
			return fmt.Errorf("%s:%d: %s: variables are not expanded here", opts.dockerfile, in.line, in.cmd)
		}
		switch in.cmd {
		case "ENTRYPOINT":
			if im.config.Entrypoint, err = execForm(in, true); err != nil {
				return err
			}
			if !cmdSet { // docker build drops the CMD of the base when the ENTRYPOINT changes
				im.config.Cmd = nil
			}
		case "CMD":
			if im.config.Cmd, err = execForm(in, true); err != nil {
				return err
			}
			cmdSet = true
		case "USER":
			im.config.User = in.args
		case "WORKDIR":
			if path.IsAbs(in.args) {
				im.config.WorkingDir = path.Clean(in.args)
			} else {
				im.config.WorkingDir = path.Join(im.config.WorkingDir, in.args)
			}
			if !isDir(im.config.WorkingDir, im.fs, im.baseFS) {
				im.fs.mkdirAll(im.config.WorkingDir)
			}
		case "ENV", "LABEL":
			kvs, err := keyValues(in)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				if in.cmd == "LABEL" {
					if im.config.Labels == nil {
						im.config.Labels = map[string]string{}
					}
					im.config.Labels[kv[0]] = kv[1]
				} else {
					im.setEnv(kv[0], kv[1])
				}
			}
		case "EXPOSE":
			for _, p := range strings.Fields(in.args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				if im.config.ExposedPorts == nil {
					im.config.ExposedPorts = map[string]struct{}{}
				}
				im.config.ExposedPorts[p] = struct{}{}
			}
		case "STOPSIGNAL":
			im.config.StopSignal = in.args
		case "VOLUME":
			vols, err := execForm(in, false)
			if err != nil {
				return err
			}
			for _, v := range vols {
				if im.config.Volumes == nil {
					im.config.Volumes = map[string]struct{}{}
				}
				im.config.Volumes[v] = struct{}{}
			}
		case "COPY", "ADD":
			if err := im.copy(in); err != nil {
				return fmt.Errorf("%s:%d: %w", opts.dockerfile, in.line, err)
			}
		case "ARG":
			// only builder stages use build arguments
		default:
			return fmt.Errorf("%s:%d: %s is not supported without a container engine", opts.dockerfile, in.line, in.cmd)
		}
	}
	return im.write(final.from)
}

func (im *image) setEnv(k, v string) {
	for i, kv := range im.config.Env {
		if strings.HasPrefix(kv, k+"=") {
			im.config.Env[i] = k + "=" + v
			return
		}
	}
	im.config.Env = append(im.config.Env, k+"="+v)
}

// copy does a COPY or ADD: from the context, or from what -from says a builder stage made.
// The files belong to root unless --chown gives numeric ids, as with docker build.
func (im *image) copy(in instruction) error {
	words, err := execForm(in, false)
	if err != nil {
		return err
	}
	if len(words) < 2 {
		return fmt.Errorf("%s: want sources and a destination", in.cmd)
	}
	uid, gid := 0, 0
	for k, v := range in.flags {
		switch k {
		case "from":
		case "chown":
			u, g, _ := strings.Cut(v, ":")
			if g == "" {
				g = u
			}
			var err1, err2 error
			uid, err1 = strconv.Atoi(u)
			gid, err2 = strconv.Atoi(g)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("%s --chown=%s: only numeric ids are supported", in.cmd, v)
			}
		default:
			return fmt.Errorf("%s --%s is not supported", in.cmd, k)
		}
	}
	srcs, dst := words[:len(words)-1], words[len(words)-1]
	toDir := strings.HasSuffix(dst, "/") || dst == "." || len(srcs) > 1
	if !path.IsAbs(dst) {
		dst = path.Join(im.config.WorkingDir, dst)
	}
	toDir = toDir || isDir(dst, im.fs, im.baseFS)
	from := in.flags["from"]
	for _, src := range srcs {
		var host string
		if from != "" {
			var ok bool
			if host, ok = im.opts.stageFiles[from+":"+src]; !ok {
				return fmt.Errorf("%s --from=%s %s: give what the stage %s makes there with -from %s:%s=<host path>", in.cmd, from, src, from, from, src)
			}
		} else {
			if strings.ContainsAny(src, "*?[") || strings.Contains(src, "://") {
				return fmt.Errorf("%s %s: wildcards and URLs are not supported", in.cmd, src)
			}
			host = filepath.Join(im.opts.context, filepath.FromSlash(src))
			if rel, err := filepath.Rel(im.opts.context, host); err != nil || strings.HasPrefix(rel, "..") {
				return fmt.Errorf("%s %s: outside the context", in.cmd, src)
			}
		}
		info, err := os.Stat(host)
		if err != nil {
			return err
		}
		if in.cmd == "ADD" && !info.IsDir() && isArchive(host) {
			return fmt.Errorf("ADD %s: extracting archives is not supported", src)
		}
		target := dst
		if !info.IsDir() && toDir {
			target = path.Join(dst, path.Base(src))
		}
		if err := im.fs.copyHost(host, target, uid, gid, from == ""); err != nil {
			return err
		}
		im.history = append(im.history, fmt.Sprintf("%s %s %s", in.cmd, src, target))
	}
	return nil
}

func isArchive(p string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar.zst"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// layer writes r into a layer; the tar is kept in a temporary file and compressed once.
func (im *image) layer(r rootfs) (v1.Layer, error) {
	dir := filepath.Dir(im.opts.out)
	f, err := os.CreateTemp(dir, ".layer-*.tar")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name()) // the layer is read back into memory below
	if err := r.writeTar(f, im.opts.mtime); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromFile(f.Name(), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	// Compress now, while the file exists; the compressed bytes stay cached.
	if _, err := l.Digest(); err != nil {
		return nil, err
	}
	if _, err := l.DiffID(); err != nil {
		return nil, err
	}
	return l, nil
}

// write assembles the image and writes it as a tarball `docker load`, `kind load
// image-archive`, `crane push` and `skopeo copy docker-archive:` read.
func (im *image) write(from string) error {
	ref, err := name.NewTag(im.opts.tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(im.opts.out), 0o755); err != nil {
		return err
	}
	created := v1.Time{Time: im.opts.mtime}
	img := empty.Image
	if im.base != nil {
		l, err := im.layer(im.baseFS)
		if err != nil {
			return err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{
			Created: created, CreatedBy: "imagetar: stand-in for " + from + " (docs/development/images.md)"}})
		if err != nil {
			return err
		}
	}
	im.fs.inherit(im.baseFS)
	l, err := im.layer(im.fs)
	if err != nil {
		return err
	}
	sort.Strings(im.history)
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{
		Created: created, CreatedBy: "imagetar: " + filepath.Base(im.opts.dockerfile) + ": " + strings.Join(im.history, "; ")}})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = im.opts.platform.OS, im.opts.platform.Architecture, im.opts.platform.Variant
	cf.Config = im.config
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := im.opts.out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, im.opts.out)
}

// tarTypes names the tar entry types for inspect.
var tarTypes = map[byte]string{tar.TypeDir: "dir", tar.TypeReg: "file", tar.TypeSymlink: "symlink", tar.TypeLink: "hardlink"}
