package nodestatus

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
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
