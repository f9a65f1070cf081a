package containerd

// The pause image: no registry is needed, the nodelet builds it from a
// static pause binary (cmd/pause) as a one-layer OCI archive and imports it
// into containerd when it is missing.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	goruntime "runtime"
	"time"

	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nodelet/nodelet/runtime"
)

// annotationImageName is containerd's annotation naming an image in an
// index; Import uses it as the image's full name.
const annotationImageName = "io.containerd.image.name"

// pauseEpoch is the mtime of every file, so that one binary always gives
// the same image digest.
var pauseEpoch = time.Unix(0, 0).UTC()

// tarFile is one entry of a tar: a directory when data is nil and dir set.
type tarFile struct {
	name string
	mode int64
	dir  bool
	data []byte
}

func writeTar(w *tar.Writer, files []tarFile) error {
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: pauseEpoch, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := w.WriteHeader(h); err != nil {
			return fmt.Errorf("write tar entry %s: %w", f.name, err)
		}
		if !f.dir {
			if _, err := w.Write(f.data); err != nil {
				return fmt.Errorf("write tar entry %s: %w", f.name, err)
			}
		}
	}
	return w.Close()
}

// pauseLayer returns the layer's uncompressed and gzipped tar.
func pauseLayer(bin []byte) (raw, gz []byte, err error) {
	var buf bytes.Buffer
	files := []tarFile{{name: "dev/", mode: 0o755, dir: true}, {name: "etc/", mode: 0o755, dir: true},
		{name: "proc/", mode: 0o755, dir: true}, {name: "sys/", mode: 0o755, dir: true},
		{name: "pause", mode: 0o755, data: bin}}
	if err := writeTar(tar.NewWriter(&buf), files); err != nil {
		return nil, nil, err
	}
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	if _, err := zw.Write(buf.Bytes()); err != nil {
		return nil, nil, fmt.Errorf("gzip pause layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, nil, fmt.Errorf("gzip pause layer: %w", err)
	}
	return buf.Bytes(), zbuf.Bytes(), nil
}

type ociBlob struct {
	desc ocispec.Descriptor
	data []byte
}

func newOCIBlob(mediaType string, v any) (ociBlob, error) {
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return ociBlob{}, fmt.Errorf("marshal %s: %w", mediaType, err)
		}
	}
	return ociBlob{desc: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}, data: data}, nil
}

// WritePauseArchive writes an OCI image archive named ref at file whose
// only program is the static binary at binPath (entrypoint /pause).
func WritePauseArchive(file, binPath, ref string) error {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return fmt.Errorf("read pause binary %s: %w", binPath, err)
	}
	raw, gz, err := pauseLayer(bin)
	if err != nil {
		return err
	}
	platform := ocispec.Platform{OS: "linux", Architecture: goruntime.GOARCH}
	layer, _ := newOCIBlob(ocispec.MediaTypeImageLayerGzip, gz)
	config, err := newOCIBlob(ocispec.MediaTypeImageConfig, ocispec.Image{
		Created: &pauseEpoch, Platform: platform,
		Config: ocispec.ImageConfig{Entrypoint: []string{"/pause"}},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(raw)}},
	})
	if err != nil {
		return err
	}
	manifest, err := newOCIBlob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: config.desc, Layers: []ocispec.Descriptor{layer.desc},
	})
	if err != nil {
		return err
	}
	d := manifest.desc
	d.Platform = &platform
	d.Annotations = map[string]string{annotationImageName: ref}
	index, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{d}})
	if err != nil {
		return fmt.Errorf("marshal pause index: %w", err)
	}
	layout, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	files := []tarFile{{name: ocispec.ImageLayoutFile, mode: 0o644, data: layout}, {name: ocispec.ImageIndexFile, mode: 0o644, data: index}}
	for _, b := range []ociBlob{layer, config, manifest} {
		files = append(files, tarFile{name: path.Join(ocispec.ImageBlobsDir, b.desc.Digest.Algorithm().String(), b.desc.Digest.Encoded()), mode: 0o644, data: b.data})
	}
	return writeArchiveFile(file, files)
}

func writeArchiveFile(file string, files []tarFile) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create directory of %s: %w", file, err)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("create pause archive: %w", err)
	}
	if err := writeTar(tar.NewWriter(f), files); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", file, err)
	}
	return nil
}

// EnsurePauseImage imports the pause image ref, built from binPath in
// workDir, unless containerd already has it.
func (c *Runtime) EnsurePauseImage(ctx context.Context, ref, binPath, workDir string) error {
	ctx = c.nsCtx(ctx)
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return err
	}
	_, err = c.client.GetImage(ctx, name)
	if err == nil {
		return nil
	}
	if !errdefs.IsNotFound(err) {
		return fmt.Errorf("look up pause image %s: %w", name, err)
	}
	if binPath == "" {
		return fmt.Errorf("pause image %s missing and no pause binary given", name)
	}
	file := filepath.Join(workDir, "pause-image.tar")
	if err := WritePauseArchive(file, binPath, name); err != nil {
		return fmt.Errorf("build pause image %s: %w", name, err)
	}
	defer os.Remove(file)
	if _, err := c.ImportArchive(ctx, file); err != nil {
		return fmt.Errorf("import pause image %s: %w", name, err)
	}
	c.log.Info("pause image imported", "image", name, "binary", binPath)
	return nil
}
