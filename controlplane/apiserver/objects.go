package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// Objects are stored in the Kubernetes protobuf envelope (as upstream
// stores them in etcd) under /<resource>[.<group>]/[<namespace>/]<name>,
// without resourceVersion: the store's ModRevision is the resourceVersion,
// set on every read. Values that are JSON (no protobuf magic prefix) are
// read too. A resource served in several versions or groups is stored once,
// in its storage version (registry.Resource.Stored), under that version's
// keys; the codec converts between it and the served version.

var protobufMagic = []byte("k8s\x00")

func resourcePrefix(res *registry.Resource) string {
	res = res.StorageResource()
	if res.GroupVersion.Group == "" {
		return "/" + res.Name + "/"
	}
	return "/" + res.Name + "." + res.GroupVersion.Group + "/"
}

func listPrefix(res *registry.Resource, ns string) string {
	if res.Namespaced && ns != "" {
		return resourcePrefix(res) + ns + "/"
	}
	return resourcePrefix(res)
}

func objectKey(res *registry.Resource, ns, name string) string {
	if res.Namespaced {
		return resourcePrefix(res) + ns + "/" + name
	}
	return resourcePrefix(res) + name
}

// objectCodec encodes objects for storage and decodes stored values.
type objectCodec struct {
	proto runtime.Serializer
}

// decode turns a stored value into a typed object carrying its
// resourceVersion and type metadata.
func (c objectCodec) decode(res *registry.Resource, kv storage.KV) (runtime.Object, error) {
	obj := res.StorageResource().New()
	var err error
	if bytes.HasPrefix(kv.Value, protobufMagic) {
		_, _, err = c.proto.Decode(kv.Value, nil, obj)
	} else {
		err = json.Unmarshal(kv.Value, obj)
	}
	if err != nil {
		return nil, fmt.Errorf("decode stored %s %q: %w", res.Kind, kv.Key, err)
	}
	if res.Stored != nil {
		served := res.New()
		if err := res.Convert(obj, served); err != nil {
			return nil, fmt.Errorf("convert stored %s %q to %s: %w", res.Kind, kv.Key, res.GroupVersion, err)
		}
		obj = served
	}
	setTypeMeta(res, obj)
	if _, ok := obj.(runtime.Unstructured); ok && res.Default != nil {
		// A custom resource is pruned and defaulted as it is read, as
		// upstream's storage decoder does: a default added to its schema
		// later shows on objects stored before.
		res.Default(obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
	return obj, nil
}

// encode marshals obj, an object of res, for storage (converted to the
// storage version, obj itself unchanged), without its resourceVersion. The
// encoding is deterministic (map keys sorted), so equal objects give equal
// bytes: updates that change nothing are detected by comparing them.
func (c objectCodec) encode(res *registry.Resource, obj runtime.Object) ([]byte, error) {
	if res.Stored != nil {
		stored := res.Stored.New()
		if err := res.Convert(obj, stored); err != nil {
			return nil, fmt.Errorf("convert %s to %s for storage: %w", res.GroupVersionKind(), res.Stored.GroupVersion, err)
		}
		setTypeMeta(res.Stored, stored)
		obj = stored
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := m.GetResourceVersion()
	m.SetResourceVersion("")
	defer m.SetResourceVersion(rv)
	if _, ok := obj.(runtime.Unstructured); ok {
		// Custom resources have no protobuf: JSON, its keys sorted.
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encode %s %q: %w", res.Kind, m.GetName(), err)
		}
		return data, nil
	}
	var buf bytes.Buffer
	if err := c.proto.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	return buf.Bytes(), nil
}

func setTypeMeta(res *registry.Resource, obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(res.GroupVersionKind())
}

func setRV(obj runtime.Object, rev int64) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(rev, 10))
	}
}

// parseRV parses a resourceVersion; "" and "0" are 0.
func parseRV(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
	}
	return n, nil
}

// getObject reads one object or returns a NotFound API error.
func (s *Server) getObject(ctx context.Context, res *registry.Resource, ns, name string) (runtime.Object, storage.KV, error) {
	kv, err := s.store.Get(ctx, objectKey(res, ns, name))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, kv, apierrors.NewNotFound(groupResource(res), name)
	}
	if err != nil {
		return nil, kv, err
	}
	obj, err := s.codec.decode(res, kv)
	return obj, kv, err
}

func groupResource(res *registry.Resource) schema.GroupResource {
	return schema.GroupResource{Group: res.GroupVersion.Group, Resource: res.Name}
}

func accessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		// Every registry type has ObjectMeta; anything else is a programming error.
		panic(fmt.Sprintf("object %T has no metadata: %v", obj, err))
	}
	return m
}
