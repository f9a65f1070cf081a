package containerd

// Images: import of local archives (pause image, air-gapped nodes), pulls
// per imagePullPolicy, and the image configuration a container spec needs.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	ctrdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
)

// ImportArchive imports an image archive (OCI or docker format) into the
// runtime's namespace and unpacks every imported image with the runtime's
// snapshotter, so containers can start from it without a pull (the pause
// image, air-gapped nodes). It returns the imported names.
func (c *Runtime) ImportArchive(ctx context.Context, path string) ([]string, error) {
	ctx = c.nsCtx(ctx)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import image archive %s: %w", path, err)
	}
	defer f.Close()
	imgs, err := c.client.Import(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("import image archive %s: %w", path, err)
	}
	refs := make([]string, 0, len(imgs))
	for _, img := range imgs {
		if err := ctrdclient.NewImage(c.client, img).Unpack(ctx, c.cfg.SnapshotterName); err != nil {
			return nil, fmt.Errorf("unpack image %s from %s: %w", img.Name, path, err)
		}
		refs = append(refs, img.Name)
	}
	return refs, nil
}

// EnsureImage is EnsureImageWith without pull secrets.
func (c *Runtime) EnsureImage(ctx context.Context, ref string, policy corev1.PullPolicy) (runtime.Image, error) {
	img, _, err := c.EnsureImageWith(ctx, ref, runtime.PullOptions{Policy: policy})
	return img, err
}

// EnsureImageWith makes the image present and unpacked according to the
// pull policy: IfNotPresent and Never use a local image; Always, and a
// missing image under IfNotPresent, pull with the matching credentials of
// the secrets (errors wrap ErrImagePull); a missing image under Never is
// ErrImageNeverPull. Pulls wait for a slot (RegistryConfig.
// MaxParallelPulls); callers pulling the same image with the same
// credentials at once share one pull.
func (c *Runtime) EnsureImageWith(ctx context.Context, ref string, opts runtime.PullOptions) (runtime.Image, runtime.PullResult, error) {
	start := time.Now()
	ctx = c.nsCtx(ctx)
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return runtime.Image{}, runtime.PullResult{}, err
	}
	var img ctrdclient.Image
	if opts.Policy != corev1.PullAlways {
		img, err = c.client.GetImage(ctx, name)
		switch {
		case errdefs.IsNotFound(err) && opts.Policy == corev1.PullNever:
			return runtime.Image{}, runtime.PullResult{}, fmt.Errorf("image %s: %w", name, runtime.ErrImageNeverPull)
		case err != nil && !errdefs.IsNotFound(err):
			return runtime.Image{}, runtime.PullResult{}, fmt.Errorf("look up image %s: %w", name, err)
		}
	}
	var res runtime.PullResult
	if img == nil {
		if img, res.Duration, err = c.pullImage(ctx, name, opts.Secrets); err != nil {
			return runtime.Image{}, runtime.PullResult{}, err
		}
		res.Pulled = true
	}
	out, err := c.describeImage(ctx, img)
	res.WithWaiting = time.Since(start)
	if err == nil && res.Pulled && c.cfg.Registry.ObservePull != nil {
		c.cfg.Registry.ObservePull(res.Duration, out.Size)
	}
	return out, res, err
}

// pullImage pulls name through the pull queue with the credentials of the
// secrets that match it.
func (c *Runtime) pullImage(ctx context.Context, name string, secrets []*corev1.Secret) (ctrdclient.Image, time.Duration, error) {
	kr, err := runtime.KeyringFromSecrets(secrets)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: pull %s: %w", runtime.ErrImagePull, name, err)
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %q: %v", runtime.ErrInvalidImageName, name, err)
	}
	creds, _ := kr.Lookup(reference.TrimNamed(named).String())
	img, took, err := c.pulls.do(ctx, name+"\x00"+runtime.CredentialsKey(creds), func(ctx context.Context) (ctrdclient.Image, error) {
		return c.pullWithCredentials(ctx, name, creds)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("%w: pull %s: %w", runtime.ErrImagePull, name, err)
	}
	c.log.Debug("pulled image", "image", name, "took", took)
	return img, took, nil
}

// ImagePresent tells whether the image is in containerd's store (so that
// IfNotPresent will not pull it).
func (c *Runtime) ImagePresent(ctx context.Context, ref string) bool {
	name, err := runtime.NormalizeImageRef(ref)
	if err != nil {
		return false
	}
	_, err = c.client.GetImage(c.nsCtx(ctx), name)
	return err == nil
}

// describeImage unpacks img when needed and reads its configuration.
func (c *Runtime) describeImage(ctx context.Context, img ctrdclient.Image) (runtime.Image, error) {
	name := img.Name()
	unpacked, err := img.IsUnpacked(ctx, c.cfg.SnapshotterName)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("check unpacked image %s: %w", name, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, c.cfg.SnapshotterName); err != nil {
			return runtime.Image{}, fmt.Errorf("unpack image %s: %w", name, err)
		}
	}
	spec, err := img.Spec(ctx)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("read config of image %s: %w", name, err)
	}
	cfgDesc, err := img.Config(ctx)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("read config descriptor of image %s: %w", name, err)
	}
	size, err := img.Size(ctx)
	if err != nil {
		return runtime.Image{}, fmt.Errorf("size of image %s: %w", name, err)
	}
	out := runtime.Image{
		Ref:  name,
		ID:   cfgDesc.Digest.String(),
		Size: size,
		Config: runtime.ImageConfig{
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

// ListImages lists the images of the runtime's namespace, one per config
// digest (several names may share one), sorted by ID.
func (c *Runtime) ListImages(ctx context.Context) ([]runtime.StoredImage, error) {
	ctx = c.nsCtx(ctx)
	imgs, err := c.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	byID := map[string]*runtime.StoredImage{}
	for _, i := range imgs {
		img := ctrdclient.NewImage(c.client, i)
		cfg, err := img.Config(ctx)
		if errdefs.IsNotFound(err) {
			continue // content not there (yet or any more)
		}
		if err != nil {
			return nil, fmt.Errorf("read config descriptor of image %s: %w", i.Name, err)
		}
		s := byID[cfg.Digest.String()]
		if s == nil {
			size, err := img.Size(ctx)
			if err != nil && !errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("size of image %s: %w", i.Name, err)
			}
			s = &runtime.StoredImage{ID: cfg.Digest.String(), Size: size}
			byID[s.ID] = s
		}
		s.Records = append(s.Records, i.Name)
		addImageNames(s, i.Name, i.Target.Digest.String())
	}
	out := make([]runtime.StoredImage, 0, len(byID))
	for _, s := range byID {
		slices.Sort(s.RepoTags)
		slices.Sort(s.RepoDigests)
		slices.Sort(s.Records)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b runtime.StoredImage) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// addImageNames adds name (a tag or a digest reference) and its repo's
// reference by manifest digest to s.
func addImageNames(s *runtime.StoredImage, name, manifest string) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		s.RepoTags = appendNew(s.RepoTags, name)
		return
	}
	if _, isDigest := named.(reference.Digested); !isDigest {
		s.RepoTags = appendNew(s.RepoTags, name)
	}
	s.RepoDigests = appendNew(s.RepoDigests, named.Name()+"@"+manifest)
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// ImagesInUse are the names of the images that containerd containers of
// the namespace (running or not) reference.
func (c *Runtime) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	ctrs, err := c.client.ContainerService().List(c.nsCtx(ctx))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	used := map[string]bool{}
	for _, ctr := range ctrs {
		if ctr.Image != "" {
			used[ctr.Image] = true
		}
	}
	return used, nil
}

// RemoveImage deletes the image's names from containerd; the last delete
// waits for containerd's garbage collection to remove its content. A name
// already gone is success.
func (c *Runtime) RemoveImage(ctx context.Context, img runtime.StoredImage) error {
	ctx = c.nsCtx(ctx)
	names := img.Records
	for i, name := range names {
		var opts []images.DeleteOpt
		if i == len(names)-1 {
			opts = append(opts, images.SynchronousDelete())
		}
		if err := c.client.ImageService().Delete(ctx, name, opts...); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete image %s (%s): %w", name, img.ID, err)
		}
	}
	return nil
}
