package containerd

// The executor's part of image garbage collection: where containerd keeps
// images, for the usage the GC policy is measured against
// (runtime.PlanImageGC decides what to remove; ListImages, ImagesInUse
// and RemoveImage in images.go do the rest).

import (
	"context"
	"fmt"

	"github.com/containerd/containerd/v2/defaults"
)

// ImageFSRoot asks containerd where it stores images: the root of its
// snapshotter (unpacked layers, upstream's image filesystem), else of
// its content store. "" when containerd exports neither.
func (c *Runtime) ImageFSRoot(ctx context.Context) (string, error) {
	snapshotter := c.cfg.SnapshotterName
	if snapshotter == "" {
		snapshotter = defaults.DefaultSnapshotter
	}
	for _, filter := range []string{
		"type==io.containerd.snapshotter.v1,id==" + snapshotter,
		"type==io.containerd.content.v1,id==content",
	} {
		resp, err := c.client.IntrospectionService().Plugins(c.nsCtx(ctx), filter)
		if err != nil {
			return "", fmt.Errorf("introspect containerd plugins %s: %w", filter, err)
		}
		for _, p := range resp.Plugins {
			if root := p.Exports["root"]; root != "" {
				return root, nil
			}
		}
	}
	return "", nil
}
