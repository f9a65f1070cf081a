package nodelet

import "k8s.io/apimachinery/pkg/api/meta"

// dropUnread is the transform of the node's Services and EndpointSlices
// informers: managed fields and annotations (kubectl's last-applied
// configuration can be larger than the object) are read by none of their
// users.
func dropUnread(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		m.SetAnnotations(nil)
	}
	return obj, nil
}
