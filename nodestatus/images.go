package nodestatus

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/runtime"
)

// Upstream's limits of status.images: nodeStatusMaxImages images, the
// largest, each with at most maxNamesPerImageInNodeStatus names.
const (
	MaxImages        = 50
	maxNamesPerImage = 5
)

// ImageList is status.images of the node's images: largest first (then
// by first name, for a stable status), at most MaxImages, each with at
// most maxNamesPerImage names; images without a name are left out.
func ImageList(imgs []corev1.ContainerImage) []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, 0, min(len(imgs), MaxImages))
	for _, img := range imgs {
		if len(img.Names) == 0 {
			continue
		}
		out = append(out, corev1.ContainerImage{Names: slices.Clone(img.Names[:min(len(img.Names), maxNamesPerImage)]), SizeBytes: img.SizeBytes})
	}
	slices.SortStableFunc(out, func(a, b corev1.ContainerImage) int {
		if c := cmp.Compare(b.SizeBytes, a.SizeBytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Names[0], b.Names[0])
	})
	return out[:min(len(out), MaxImages)]
}

// imagesTimeout bounds the image listing of one node status update;
// imagesMaxAge is how long a listing serves status updates. A listing
// reads every image's manifest and config from containerd to size it: too
// much for each 10 s status update, so, as upstream's image cache, it is
// redone at most every 30 s.
const (
	imagesTimeout = 5 * time.Second
	imagesMaxAge  = 30 * time.Second
)

// CachedImages lists the images for status.images: names are the repo tags
// then the repo digests (nodestatus.ImageList sorts and cuts). A failed
// listing is not cached.
func CachedImages(ctx context.Context, list func(context.Context) ([]runtime.StoredImage, error), now func() time.Time) func() ([]corev1.ContainerImage, error) {
	var mu sync.Mutex
	var last []corev1.ContainerImage
	var at time.Time
	return func() ([]corev1.ContainerImage, error) {
		mu.Lock()
		defer mu.Unlock()
		if last != nil && now().Sub(at) < imagesMaxAge {
			return last, nil
		}
		ctx, cancel := context.WithTimeout(ctx, imagesTimeout)
		defer cancel()
		imgs, err := list(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]corev1.ContainerImage, 0, len(imgs))
		for _, img := range imgs {
			out = append(out, corev1.ContainerImage{Names: img.Names(), SizeBytes: img.Size})
		}
		last, at = out, now()
		return out, nil
	}
}
