package runtime

// Images: import of local archives (pause image, air-gapped nodes), pulls
// per imagePullPolicy, and the image configuration a container spec needs.

import (
	"context"
	"errors"
	"fmt"
	"os"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
)

// ErrImagePull wraps every failure to pull an image (the pod's waiting
// reason ErrImagePull).
var ErrImagePull = errors.New("runtime: image pull failed")

// ErrImageNeverPull is returned for a missing image under
// imagePullPolicy Never (the waiting reason ErrImageNeverPull).
var ErrImageNeverPull = errors.New("runtime: image not present and pull policy is Never")

// ErrInvalidImageName is returned for a reference that does not parse
// (the waiting reason InvalidImageName).
var ErrInvalidImageName = errors.New("runtime: invalid image name")

// Image is an image present (and unpacked) in containerd.
type Image struct {
	// Ref is the normalized reference (docker.io/library/nginx:1.22).
	Ref string
	// ID is the digest of the image's config (what `crictl images` shows).
	ID string
	// RepoDigest is the reference by manifest digest
	// (docker.io/library/nginx@sha256:...), for status.imageID.
	RepoDigest string
	Config     ImageConfig
}

// NormalizeImageRef expands a reference as docker does: nginx:1.22 becomes
// docker.io/library/nginx:1.22 and a reference without tag or digest gets
// :latest.
func NormalizeImageRef(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidImageName, ref, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

// ImportArchive imports an image archive (OCI or docker format) into the
// client's namespace (carried by ctx) and unpacks every imported image with
// the snapshotter ("" is the default). It returns the imported names.
func ImportArchive(ctx context.Context, client *containerd.Client, path, snapshotter string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import image archive %s: %w", path, err)
	}
	defer f.Close()
	imgs, err := client.Import(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("import image archive %s: %w", path, err)
	}
	refs := make([]string, 0, len(imgs))
	for _, img := range imgs {
		if err := containerd.NewImage(client, img).Unpack(ctx, snapshotter); err != nil {
			return nil, fmt.Errorf("unpack image %s from %s: %w", img.Name, path, err)
		}
		refs = append(refs, img.Name)
	}
	return refs, nil
}

// EnsureImage makes the image present and unpacked according to the pull
// policy: IfNotPresent and Never use a local image; Always, and a missing
// image under IfNotPresent, pull (errors wrap ErrImagePull); a missing
// image under Never is ErrImageNeverPull. An empty policy is IfNotPresent.
func (c *Containerd) EnsureImage(ctx context.Context, ref string, policy corev1.PullPolicy) (Image, error) {
	ctx = c.nsCtx(ctx)
	name, err := NormalizeImageRef(ref)
	if err != nil {
		return Image{}, err
	}
	var img containerd.Image
	if policy != corev1.PullAlways {
		img, err = c.client.GetImage(ctx, name)
		switch {
		case errdefs.IsNotFound(err) && policy == corev1.PullNever:
			return Image{}, fmt.Errorf("image %s: %w", name, ErrImageNeverPull)
		case err != nil && !errdefs.IsNotFound(err):
			return Image{}, fmt.Errorf("look up image %s: %w", name, err)
		}
	}
	if img == nil {
		img, err = c.client.Pull(ctx, name, containerd.WithPullUnpack, containerd.WithPullSnapshotter(c.cfg.SnapshotterName))
		if err != nil {
			return Image{}, fmt.Errorf("%w: pull %s: %w", ErrImagePull, name, err)
		}
	}
	return c.describeImage(ctx, img)
}

// ImagePresent tells whether the image is in containerd's store (so that
// IfNotPresent will not pull it).
func (c *Containerd) ImagePresent(ctx context.Context, ref string) bool {
	name, err := NormalizeImageRef(ref)
	if err != nil {
		return false
	}
	_, err = c.client.GetImage(c.nsCtx(ctx), name)
	return err == nil
}

// describeImage unpacks img when needed and reads its configuration.
func (c *Containerd) describeImage(ctx context.Context, img containerd.Image) (Image, error) {
	name := img.Name()
	unpacked, err := img.IsUnpacked(ctx, c.cfg.SnapshotterName)
	if err != nil {
		return Image{}, fmt.Errorf("check unpacked image %s: %w", name, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, c.cfg.SnapshotterName); err != nil {
			return Image{}, fmt.Errorf("unpack image %s: %w", name, err)
		}
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("read config of image %s: %w", name, err)
	}
	cfgDesc, err := img.Config(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("read config descriptor of image %s: %w", name, err)
	}
	out := Image{
		Ref: name,
		ID:  cfgDesc.Digest.String(),
		Config: ImageConfig{
			User:       spec.Config.User,
			Env:        spec.Config.Env,
			Entrypoint: spec.Config.Entrypoint,
			Cmd:        spec.Config.Cmd,
			WorkingDir: spec.Config.WorkingDir,
		},
	}
	if named, err := reference.ParseNormalizedNamed(name); err == nil {
		if d, err := reference.WithDigest(reference.TrimNamed(named), img.Target().Digest); err == nil {
			out.RepoDigest = d.String()
		}
	}
	return out, nil
}
