package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// serveScale serves deployments/scale and replicasets/scale as
// autoscaling/v1 Scale objects; a scale change is stored as an update of
// the main resource, so defaults, generation and validation follow.
func (s *Server) serveScale(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	res := info.Resource
	switch info.Verb {
	case "get":
		obj, _, err := s.getObject(r.Context(), res, info.Namespace, info.Name)
		if err != nil {
			return err
		}
		sc, err := registry.ScaleOfResource(res, obj)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, sc)
		return nil
	case "update", "patch":
	default:
		return apierrors.NewMethodNotSupported(groupResource(res), info.Verb+" scale")
	}
	var put *autoscalingv1.Scale
	var patchType string
	var patch []byte
	var opts writeOpts
	var force bool
	var err error
	if info.Verb == "update" {
		if opts, err = updateOpts(r); err != nil {
			return err
		}
		put = &autoscalingv1.Scale{}
		_, err = s.decodeBody(r, put, "Ignore")
	} else {
		if patchType, patch, err = s.readPatch(r); err == nil {
			opts, force, err = patchOpts(r, patchType)
		}
	}
	if err != nil {
		return err
	}
	var applied *unstructured.Unstructured
	if isApply(patchType) {
		if applied, err = (applyRequest{patchType: patchType, patch: patch}).decode(); err != nil {
			return err
		}
	}
	// The scale's managed fields are the main resource's entries that own
	// spec.replicas, as upstream's scale storage keeps them.
	fm, err := s.fields.forScale(res)
	if err != nil {
		if applied != nil {
			return apierrors.NewInternalError(fmt.Errorf("server-side apply of %s/scale: %w", res.GroupVersionResource(), err))
		}
		opts.manager = "" // the managed fields stay as they are
	} else {
		opts.ownFields = true
	}
	out, err := s.update(r.Context(), res, info.Namespace, info.Name, "", opts, func(cur runtime.Object) (runtime.Object, error) {
		sc, err := registry.ScaleOfResource(res, cur)
		if err != nil {
			return nil, err
		}
		sc.TypeMeta = metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"}
		var fields *managedfields.ScaleHandler
		if opts.ownFields {
			fields = managedfields.NewScaleHandler(accessor(cur).GetManagedFields(), res.GroupVersion,
				managedfields.ResourcePathMappings{res.GroupVersion.String(): replicasPathOf(res)})
			if sc.ManagedFields, err = fields.ToSubresource(); err != nil {
				sc.ManagedFields = nil
			}
		}
		want := put
		switch {
		case applied != nil:
			obj, err := fm.Apply(sc, applied.DeepCopy(), opts.manager, force)
			if err != nil {
				return nil, applyError(err)
			}
			want = obj.(*autoscalingv1.Scale)
			want.ResourceVersion = applied.GetResourceVersion()
		case want == nil:
			if want, err = patchScale(sc, patchType, patch); err != nil {
				return nil, err
			}
			if !patchPinsRV(patchType, patch) {
				want.ResourceVersion = ""
			}
		default:
			want = want.DeepCopy()
		}
		if want.Name != "" && want.Name != info.Name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, info.Name))
		}
		if errs := registry.ValidateScale(want); len(errs) > 0 {
			return nil, apierrors.NewInvalid(schemaGK("autoscaling", "Scale"), info.Name, errs)
		}
		if fields != nil {
			if applied == nil {
				want.TypeMeta = sc.TypeMeta
				tracked := fm.UpdateNoErrors(sc, want, opts.manager)
				want.ManagedFields = accessor(tracked).GetManagedFields()
			}
			parent, err := fields.ToParent(want.ManagedFields)
			if err != nil {
				return nil, err
			}
			accessor(cur).SetManagedFields(parent)
		}
		if err := registry.ApplyScaleOfResource(res, cur, want); err != nil {
			return nil, err
		}
		// The scale's resourceVersion, when given, is the precondition.
		accessor(cur).SetResourceVersion(want.ResourceVersion)
		return cur, nil
	})
	if err != nil {
		return err
	}
	sc, err := registry.ScaleOfResource(res, out)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

// replicasPath is where every built-in scalable kind keeps its replicas.
var replicasPath = fieldpath.MakePathOrDie("spec", "replicas")

// replicasPathOf is where res keeps its replicas.
func replicasPathOf(res *registry.Resource) fieldpath.Path {
	if res.Scale == nil {
		return replicasPath
	}
	p := fieldpath.Path{}
	for _, name := range res.Scale.ReplicasPath {
		p = append(p, fieldpath.PathElement{FieldName: &name})
	}
	return p
}

func patchScale(sc *autoscalingv1.Scale, patchType string, patch []byte) (*autoscalingv1.Scale, error) {
	cur, err := json.Marshal(sc)
	if err != nil {
		return nil, err
	}
	out, err := applyPatch(patchType, cur, patch, &autoscalingv1.Scale{})
	if err != nil {
		return nil, err
	}
	want := &autoscalingv1.Scale{}
	if _, err := decodeJSON(out, want, "Ignore"); err != nil {
		return nil, err
	}
	return want, nil
}

// serveBinding assigns a pod to a node (POST pods/{name}/binding), as the
// scheduler does.
func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	if info.Verb != "create" {
		return apierrors.NewMethodNotSupported(groupResource(info.Resource), info.Verb+" binding")
	}
	b := &corev1.Binding{}
	if _, err := s.decodeBody(r, b, "Ignore"); err != nil {
		return err
	}
	if b.Name != "" && b.Name != info.Name {
		return apierrors.NewBadRequest("the name of the binding does not match the pod name")
	}
	if errs := registry.ValidateBinding(b); len(errs) > 0 {
		return apierrors.NewInvalid(schemaGK("", "Binding"), info.Name, errs)
	}
	// Admitted as upstream's BindingREST create is, before the pod changes.
	if err := s.admitAll(r.Context(), admissionRequest{res: info.Resource, sub: "binding", op: admission.Create,
		kind: corev1.SchemeGroupVersion.WithKind("Binding"), ns: info.Namespace, name: info.Name, obj: b,
		opts: &metav1.CreateOptions{}, dryRun: isDryRun(r)}); err != nil {
		return err
	}
	_, err := s.update(r.Context(), info.Resource, info.Namespace, info.Name, subRaw, writeOpts{dryRun: isDryRun(r)}, func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*corev1.Pod)
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(groupResource(info.Resource), info.Name, fmt.Errorf("the UID in the binding (%s) does not match the pod (%s)", b.UID, pod.UID))
		}
		if err := registry.BindPod(pod, b, time.Now()); err != nil {
			return nil, apierrors.NewConflict(groupResource(info.Resource), info.Name, err)
		}
		pod.ResourceVersion = b.ResourceVersion
		return pod, nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	return nil
}

// serveFinalize replaces a namespace's spec.finalizers (PUT
// namespaces/{name}/finalize); the namespace controller calls it when the
// namespace is empty, and a terminating namespace goes once none are left.
func (s *Server) serveFinalize(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	if info.Verb != "update" {
		return apierrors.NewMethodNotSupported(groupResource(info.Resource), info.Verb+" finalize")
	}
	opts, err := updateOpts(r)
	if err != nil {
		return err
	}
	obj, err := s.decodeObject(w, r, info.Resource)
	if err != nil {
		return err
	}
	out, err := s.update(r.Context(), info.Resource, "", info.Name, "finalize", opts,
		func(cur runtime.Object) (runtime.Object, error) { return obj, nil })
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, info.Resource, out)
}
