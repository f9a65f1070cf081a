package testregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/platforms"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nodelet/nodelet/test/images"
)

// ImageSource holds the busybox test image in a content store of its own
// (not a containerd under test) and pushes it to registries.
type ImageSource struct {
	store    content.Store
	manifest ocispec.Descriptor
}

// NewImageSource imports the busybox test image into a content store in
// a temporary directory.
func NewImageSource(t testing.TB) *ImageSource {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	tarPath, _, err := images.Busybox(dir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := local.NewStore(filepath.Join(dir, "content"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	indexDesc, err := archive.ImportIndex(ctx, store, f)
	if err != nil {
		t.Fatalf("import busybox archive: %v", err)
	}
	var index ocispec.Index
	readJSON(t, store, indexDesc, &index)
	if len(index.Manifests) == 0 {
		t.Fatal("busybox archive has no manifest")
	}
	m := index.Manifests[0]
	return &ImageSource{store: store, manifest: ocispec.Descriptor{MediaType: m.MediaType, Digest: m.Digest, Size: m.Size}}
}

// Push pushes busybox to reg as repoTag (library/busybox:1.36) with
// containerd's pusher and the registry's credentials. Extra environment
// variables make another image (its own config and manifest, the same
// layer). It returns the manifest's digest.
func (s *ImageSource) Push(t testing.TB, reg *Registry, repoTag string, env ...string) digest.Digest {
	t.Helper()
	ctx := context.Background()
	desc := s.manifest
	if len(env) > 0 {
		desc = s.variant(t, env)
	}
	opts := config.HostOptions{DefaultScheme: "http"}
	if reg.User != "" {
		opts.Credentials = func(string) (string, string, error) { return reg.User, reg.Password, nil }
	}
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, opts)})
	ref := reg.Host + "/" + repoTag
	pusher, err := resolver.Pusher(ctx, ref)
	if err != nil {
		t.Fatalf("pusher for %s: %v", ref, err)
	}
	if err := remotes.PushContent(ctx, pusher, desc, s.store, nil, platforms.All, nil); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return desc.Digest
}

// variant writes a manifest whose config has env added.
func (s *ImageSource) variant(t testing.TB, env []string) ocispec.Descriptor {
	t.Helper()
	var m ocispec.Manifest
	readJSON(t, s.store, s.manifest, &m)
	var img ocispec.Image
	readJSON(t, s.store, m.Config, &img)
	img.Config.Env = append(img.Config.Env, env...)
	m.Config = s.writeJSON(t, m.Config.MediaType, img)
	return s.writeJSON(t, s.manifest.MediaType, m)
}

func (s *ImageSource) writeJSON(t testing.TB, mediaType string, v any) ocispec.Descriptor {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := content.WriteBlob(context.Background(), s.store, desc.Digest.String(), bytes.NewReader(data), desc); err != nil {
		t.Fatalf("write %s: %v", mediaType, err)
	}
	return desc
}

func readJSON(t testing.TB, store content.Provider, desc ocispec.Descriptor, v any) {
	t.Helper()
	data, err := content.ReadBlob(context.Background(), store, desc)
	if err != nil {
		t.Fatalf("read %s: %v", desc.Digest, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("parse %s: %v", desc.Digest, err)
	}
}
