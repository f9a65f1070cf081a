package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// readTar returns the regular files of a tar stream.
func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = b
		}
	}
}

func TestWritePauseArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("#!pause"), 0o755); err != nil {
		t.Fatal(err)
	}
	const ref = "registry.k8s.io/pause:3.10-nodelet"
	file := filepath.Join(dir, "out", "pause.tar")
	if err := WritePauseArchive(file, bin, ref); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := readTar(t, f)
	var idx ocispec.Index
	if err := json.Unmarshal(files[ocispec.ImageIndexFile], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index: %v, %+v", err, idx)
	}
	if got := idx.Manifests[0].Annotations[annotationImageName]; got != ref {
		t.Errorf("image name %q, want %q", got, ref)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(files["blobs/sha256/"+idx.Manifests[0].Digest.Encoded()], &man); err != nil || len(man.Layers) != 1 {
		t.Fatalf("manifest: %v, %+v", err, man)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(files["blobs/sha256/"+man.Config.Digest.Encoded()], &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/pause" {
		t.Errorf("entrypoint %q", cfg.Config.Entrypoint)
	}
	zr, err := gzip.NewReader(bytes.NewReader(files["blobs/sha256/"+man.Layers[0].Digest.Encoded()]))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(readTar(t, zr)["pause"]); got != "#!pause" {
		t.Errorf("layer /pause = %q", got)
	}
	// Same binary, same digest.
	file2 := filepath.Join(dir, "again.tar")
	if err := WritePauseArchive(file2, bin, ref); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(file)
	b, _ := os.ReadFile(file2)
	if !bytes.Equal(a, b) {
		t.Error("archive is not reproducible")
	}
}
