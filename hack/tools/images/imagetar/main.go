// Command imagetar builds the project's container images as image tarballs without a
// container engine, and reads them back.
//
// build follows the final stage of a Dockerfile: its base image is replaced by a stand-in
// built from scratch (see base.go), COPY and ADD take their sources from the context or, for
// --from=<stage>, from the host paths -from names (what `make` built in place of the builder
// stage), and ENTRYPOINT, CMD, USER, WORKDIR, ENV, LABEL, EXPOSE, STOPSIGNAL and VOLUME
// become the image's settings. RUN in the final stage cannot be done and is an error. The
// tarball is the `docker save` format: `docker load`, `podman load`, `kind load
// image-archive`, `crane push` and `skopeo copy docker-archive:` read it. Every time stamp
// is SOURCE_DATE_EPOCH (default 0), so the same inputs give the same image digest.
//
// inspect prints an image tarball's tags, digest, platform, settings and files as JSON, and
// with -extract writes its files under a directory.
//
// usage:
//
//	imagetar build -dockerfile Dockerfile -tag REF -out FILE [-context DIR] [-platform linux/amd64]
//	    [-from STAGE:/path=HOSTPATH]... [-base-file /path=HOSTFILE]...
//	imagetar inspect [-extract DIR] FILE
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// mapFlag is a repeatable KEY=VALUE flag.
type mapFlag map[string]string

func (m mapFlag) String() string { return fmt.Sprint(map[string]string(m)) }

func (m mapFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	m[k] = v
	return nil
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = buildCmd(os.Args[2:])
	case "inspect":
		err = inspectCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagetar:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: imagetar build -dockerfile F -tag REF -out FILE [-context DIR] [-platform os/arch] [-from STAGE:/path=HOST]... [-base-file /path=HOST]...")
	fmt.Fprintln(os.Stderr, "       imagetar inspect [-extract DIR] FILE")
	os.Exit(2)
}

func buildCmd(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	opts := buildOptions{stageFiles: mapFlag{}, baseFiles: mapFlag{}}
	fs.StringVar(&opts.dockerfile, "dockerfile", "Dockerfile", "the Dockerfile whose final stage to build")
	fs.StringVar(&opts.context, "context", ".", "the build context COPY and ADD read from")
	fs.StringVar(&opts.tag, "tag", "", "the image's name and tag in the tarball")
	fs.StringVar(&opts.out, "out", "", "the tarball to write")
	platform := fs.String("platform", "linux/amd64", "os/arch[/variant] of the image")
	fs.Var(mapFlag(opts.stageFiles), "from", "STAGE:/path=HOSTPATH: what COPY --from=STAGE /path copies (repeatable)")
	fs.Var(mapFlag(opts.baseFiles), "base-file", "/path=HOSTFILE: a file the base image's stand-in needs (repeatable)")
	_ = fs.Parse(args)
	if opts.tag == "" || opts.out == "" || fs.NArg() != 0 {
		usage()
	}
	p, err := v1.ParsePlatform(*platform)
	if err != nil {
		return err
	}
	opts.platform = *p
	opts.mtime = time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%s: %w", s, err)
		}
		opts.mtime = time.Unix(sec, 0).UTC()
	}
	return build(opts)
}

func inspectCmd(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ExitOnError)
	extract := fs.String("extract", "", "write the image's files under this directory")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	return inspect(fs.Arg(0), *extract, os.Stdout)
}
