// Package images builds the test images of the nodelet (busybox, nginx,
// pause) from binaries installed on the host and writes them as OCI image
// archives (an OCI image layout in a tar file) that containerd's Import
// accepts. No registry is involved: the archives carry the references users
// would write (docker.io/library/nginx:1.22, ...), so pods keep portable
// image names while the images are pre-loaded.
//
// The OCI layout is written with the image-spec types directly rather than
// with go-containerregistry: the layout is small, and it keeps the module
// graph as it is.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "crypto/sha256" // go-digest computes sha256 only when it is linked in
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// annotationImageName is containerd's annotation naming an image in an
// index; Import uses it as the full image name.
const annotationImageName = "io.containerd.image.name"

// epoch is the modification time of every file in the layers, so that an
// image built twice from the same binaries has the same digest.
var epoch = time.Unix(0, 0).UTC()

// entry is one file system object of a layer.
type entry struct {
	path     string // absolute path inside the image
	mode     int64  // permission bits
	dir      bool
	linkname string // symlink target when not empty
	data     []byte // file contents
}

func dirEntry(p string) entry { return entry{path: p, mode: 0o755, dir: true} }
func fileEntry(p string, data []byte, mode int64) entry {
	return entry{path: p, mode: mode, data: data}
}
func symlinkEntry(p, target string) entry { return entry{path: p, mode: 0o777, linkname: target} }

// hostFile reads a file of the host (following symlinks) as an entry at
// image path p, keeping its permission bits.
func hostFile(hostPath, p string) (entry, error) {
	data, err := os.ReadFile(hostPath)
	if err != nil {
		return entry{}, fmt.Errorf("read %s for the image: %w", hostPath, err)
	}
	fi, err := os.Stat(hostPath)
	if err != nil {
		return entry{}, fmt.Errorf("stat %s: %w", hostPath, err)
	}
	return fileEntry(p, data, int64(fi.Mode().Perm())), nil
}

// layerTar writes entries as an uncompressed tar, adding every missing
// parent directory and sorting by path so that parents come first.
func layerTar(entries []entry) ([]byte, error) {
	byPath := map[string]entry{}
	for _, e := range entries {
		e.path = path.Clean("/" + e.path)
		byPath[e.path] = e
		for d := path.Dir(e.path); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = dirEntry(d)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.linkname != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.linkname
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("layer entry %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// blob is one content-addressed object of the layout.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	return blob{desc: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}, data: data}
}

func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, fmt.Errorf("marshal %s: %w", mediaType, err)
	}
	return newBlob(mediaType, data), nil
}

// image is a single-layer linux/amd64 (host architecture) image.
type image struct {
	entries []entry
	config  ocispec.ImageConfig
	refs    []string // full references, e.g. docker.io/library/nginx:1.22
}

// writeArchive writes img as an OCI archive at file and returns the path.
func writeArchive(file string, img image) (string, error) {
	layer, err := layerTar(img.entries)
	if err != nil {
		return "", err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return "", fmt.Errorf("gzip layer: %w", err)
	}
	if _, err := zw.Write(layer); err != nil {
		return "", fmt.Errorf("gzip layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("gzip layer: %w", err)
	}
	layerBlob := newBlob(ocispec.MediaTypeImageLayerGzip, gz.Bytes())
	cfg := ocispec.Image{
		Created:  &epoch,
		Platform: hostPlatform(),
		Config:   img.config,
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(layer)}},
	}
	cfgBlob, err := jsonBlob(ocispec.MediaTypeImageConfig, cfg)
	if err != nil {
		return "", err
	}
	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgBlob.desc,
		Layers:    []ocispec.Descriptor{layerBlob.desc},
	}
	manBlob, err := jsonBlob(ocispec.MediaTypeImageManifest, manifest)
	if err != nil {
		return "", err
	}
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for _, ref := range img.refs {
		d := manBlob.desc
		p := hostPlatform()
		d.Platform = &p
		d.Annotations = map[string]string{annotationImageName: ref, ocispec.AnnotationRefName: tagOf(ref)}
		index.Manifests = append(index.Manifests, d)
	}
	indexData, err := json.Marshal(index)
	if err != nil {
		return "", fmt.Errorf("marshal index: %w", err)
	}
	layoutData, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	files := []entry{
		fileEntry(ocispec.ImageLayoutFile, layoutData, 0o644),
		fileEntry(ocispec.ImageIndexFile, indexData, 0o644),
	}
	for _, b := range []blob{layerBlob, cfgBlob, manBlob} {
		files = append(files, fileEntry(path.Join(ocispec.ImageBlobsDir, b.desc.Digest.Algorithm().String(), b.desc.Digest.Encoded()), b.data, 0o644))
	}
	return file, writeTarFile(file, files)
}

// writeTarFile writes flat (no directory entries needed by Import) tar.
func writeTarFile(file string, files []entry) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", file, err)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("create image archive: %w", err)
	}
	tw := tar.NewWriter(f)
	for _, e := range files {
		h := &tar.Header{Name: e.path, Mode: e.mode, Size: int64(len(e.data)), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			f.Close()
			return fmt.Errorf("write %s to %s: %w", e.path, file, err)
		}
		if _, err := io.Copy(tw, bytes.NewReader(e.data)); err != nil {
			f.Close()
			return fmt.Errorf("write %s to %s: %w", e.path, file, err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("finish %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", file, err)
	}
	return nil
}

// tagOf returns the tag of a full reference ("1.22" of
// docker.io/library/nginx:1.22), or "latest".
func tagOf(ref string) string {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return "latest"
	}
	return ref[i+1:]
}
