package runtime

// The image vocabulary shared by the executor (package runtime/containerd),
// the nodelet and the image GC: what an image is once present, how a pull
// is asked for and what it did, and the errors that become a pod's waiting
// reasons.

import (
	"errors"
	"fmt"
	"slices"
	"time"

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
	// Size is the size of the image's content (manifest, config and
	// compressed layers) in bytes, as containerd's CRI reports it.
	Size   int64
	Config ImageConfig
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

// PullOptions says how EnsureImageWith gets an image.
type PullOptions struct {
	// Policy is the container's imagePullPolicy; empty is IfNotPresent.
	Policy corev1.PullPolicy
	// Secrets are the pod's image pull secrets, fetched by the caller:
	// those of type kubernetes.io/dockerconfigjson and kubernetes.io/
	// dockercfg give the credentials (see registry_auth.go); others are
	// ignored.
	Secrets []*corev1.Secret
}

// PullResult tells what EnsureImageWith did.
type PullResult struct {
	// Pulled is true when the image came from a registry (Always, or
	// missing under IfNotPresent), false when the local image served.
	Pulled bool
	// Duration is how long the pull itself took.
	Duration time.Duration
	// WithWaiting is the whole call, waiting for a pull slot (or for the
	// same pull of another caller) included: upstream's "(Ys including
	// waiting)".
	WithWaiting time.Duration
}

// StoredImage is one image of containerd's store, with all its names.
type StoredImage struct {
	ID string // the config digest
	// RepoTags are its names by tag, RepoDigests by manifest digest.
	RepoTags, RepoDigests []string
	// Records are the names of containerd's image records for it (what
	// containers reference and RemoveImage deletes).
	Records []string
	Size    int64
}

// Names are the image's tags then its digests (the Node status' names).
func (s StoredImage) Names() []string {
	return append(slices.Clone(s.RepoTags), s.RepoDigests...)
}
