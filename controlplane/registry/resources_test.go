package registry

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestAllResources(t *testing.T) {
	tests := []struct {
		name, gv, kind string
		namespaced     bool
		short          []string
		subresources   []string
		collection     bool
		all            bool
		generation     bool
	}{
		{"namespaces", "v1", "Namespace", false, []string{"ns"}, []string{"status", "finalize"}, false, false, false},
		{"pods", "v1", "Pod", true, []string{"po"}, []string{"status", "binding", "eviction", "ephemeralcontainers", "log", "exec", "attach", "portforward", "proxy"}, true, true, false},
		{"nodes", "v1", "Node", false, []string{"no"}, []string{"status", "proxy"}, true, false, false},
		{"persistentvolumeclaims", "v1", "PersistentVolumeClaim", true, []string{"pvc"}, []string{"status"}, true, false, false},
		{"podtemplates", "v1", "PodTemplate", true, nil, nil, true, false, true},
		{"limitranges", "v1", "LimitRange", true, []string{"limits"}, nil, true, false, false},
		{"resourcequotas", "v1", "ResourceQuota", true, []string{"quota"}, []string{"status"}, true, false, false},
		{"replicationcontrollers", "v1", "ReplicationController", true, []string{"rc"}, []string{"status", "scale"}, true, true, true},
		{"services", "v1", "Service", true, []string{"svc"}, []string{"status", "proxy"}, false, true, false},
		{"endpoints", "v1", "Endpoints", true, []string{"ep"}, nil, true, false, false},
		{"configmaps", "v1", "ConfigMap", true, []string{"cm"}, nil, true, false, false},
		{"secrets", "v1", "Secret", true, nil, nil, true, false, false},
		{"events", "v1", "Event", true, []string{"ev"}, nil, true, false, false},
		{"serviceaccounts", "v1", "ServiceAccount", true, []string{"sa"}, []string{"token"}, true, false, false},
		{"controllerrevisions", "apps/v1", "ControllerRevision", true, nil, nil, true, false, false},
		{"daemonsets", "apps/v1", "DaemonSet", true, []string{"ds"}, []string{"status"}, true, true, true},
		{"deployments", "apps/v1", "Deployment", true, []string{"deploy"}, []string{"status", "scale"}, true, true, true},
		{"replicasets", "apps/v1", "ReplicaSet", true, []string{"rs"}, []string{"status", "scale"}, true, true, true},
		{"statefulsets", "apps/v1", "StatefulSet", true, []string{"sts"}, []string{"status", "scale"}, true, true, true},
		{"cronjobs", "batch/v1", "CronJob", true, []string{"cj"}, []string{"status"}, true, true, true},
		{"jobs", "batch/v1", "Job", true, nil, []string{"status"}, true, true, true},
		{"leases", "coordination.k8s.io/v1", "Lease", true, nil, nil, true, false, false},
		{"endpointslices", "discovery.k8s.io/v1", "EndpointSlice", true, nil, nil, true, false, false},
		{"horizontalpodautoscalers", "autoscaling/v2", "HorizontalPodAutoscaler", true, []string{"hpa"}, []string{"status"}, true, true, true},
		{"horizontalpodautoscalers", "autoscaling/v1", "HorizontalPodAutoscaler", true, []string{"hpa"}, []string{"status"}, true, true, true},
		{"events", "events.k8s.io/v1", "Event", true, []string{"ev"}, nil, true, false, false},
		{"poddisruptionbudgets", "policy/v1", "PodDisruptionBudget", true, []string{"pdb"}, []string{"status"}, true, false, true},
		{"priorityclasses", "scheduling.k8s.io/v1", "PriorityClass", false, []string{"pc"}, nil, true, false, true},
		{"runtimeclasses", "node.k8s.io/v1", "RuntimeClass", false, nil, nil, true, false, false},
		{"clusterrolebindings", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", false, nil, nil, true, false, false},
		{"clusterroles", "rbac.authorization.k8s.io/v1", "ClusterRole", false, nil, nil, true, false, false},
		{"rolebindings", "rbac.authorization.k8s.io/v1", "RoleBinding", true, nil, nil, true, false, false},
		{"roles", "rbac.authorization.k8s.io/v1", "Role", true, nil, nil, true, false, false},
		{"persistentvolumes", "v1", "PersistentVolume", false, []string{"pv"}, []string{"status"}, true, false, false},
		{"csidrivers", "storage.k8s.io/v1", "CSIDriver", false, nil, nil, true, false, true},
		{"volumeattachments", "storage.k8s.io/v1", "VolumeAttachment", false, nil, []string{"status"}, true, false, false},
		{"storageclasses", "storage.k8s.io/v1", "StorageClass", false, []string{"sc"}, nil, true, false, false},
		{"csinodes", "storage.k8s.io/v1", "CSINode", false, nil, nil, true, false, false},
		{"csistoragecapacities", "storage.k8s.io/v1", "CSIStorageCapacity", true, nil, nil, true, false, false},
		{"mutatingwebhookconfigurations", "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", false, nil, nil, true, false, true},
		{"validatingadmissionpolicies", "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", false, nil, []string{"status"}, true, false, true},
		{"validatingadmissionpolicybindings", "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", false, nil, nil, true, false, true},
		{"validatingwebhookconfigurations", "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", false, nil, nil, true, false, true},
		{"apiservices", "apiregistration.k8s.io/v1", "APIService", false, nil, []string{"status"}, true, false, false},
		{"flowschemas", "flowcontrol.apiserver.k8s.io/v1", "FlowSchema", false, nil, []string{"status"}, true, false, true},
		{"prioritylevelconfigurations", "flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration", false, nil, []string{"status"}, true, false, true},
		{"certificatesigningrequests", "certificates.k8s.io/v1", "CertificateSigningRequest", false, []string{"csr"}, []string{"approval", "status"}, true, false, false},
		{"customresourcedefinitions", "apiextensions.k8s.io/v1", "CustomResourceDefinition", false, []string{"crd", "crds"}, []string{"status"}, true, false, true},
	}
	stored := 0
	for _, r := range All() {
		if !r.Review {
			stored++
		}
	}
	if stored != len(tests) {
		t.Errorf("All returned %d stored resources, want %d", stored, len(tests))
	}
	for _, name := range []string{"selfsubjectreviews", "tokenreviews"} {
		review := resourceByVersion(t, "authentication.k8s.io/v1", name)
		if !review.Review || !reflect.DeepEqual(review.Verbs, []string{"create"}) || review.Namespaced || review.Validate != nil {
			t.Errorf("%s: review %v, verbs %v, namespaced %v", name, review.Review, review.Verbs, review.Namespaced)
		}
	}
	for _, tt := range tests {
		r := resourceByVersion(t, tt.gv, tt.name)
		if r.GroupVersion.String() != tt.gv || r.Kind != tt.kind || r.ListKind != tt.kind+"List" || r.Namespaced != tt.namespaced {
			t.Errorf("%s: %s %s/%s namespaced=%v", tt.name, r.GroupVersion, r.Kind, r.ListKind, r.Namespaced)
		}
		if !reflect.DeepEqual(r.ShortNames, tt.short) || !reflect.DeepEqual(r.Subresources, tt.subresources) {
			t.Errorf("%s: short names %v, subresources %v", tt.name, r.ShortNames, r.Subresources)
		}
		if has := contains(r.Verbs, "deletecollection"); has != tt.collection || len(r.Verbs) < 7 {
			t.Errorf("%s: verbs %v", tt.name, r.Verbs)
		}
		if contains(r.Categories, "all") != tt.all || r.TrackGeneration != tt.generation || (tt.generation && r.SpecChanged == nil) {
			t.Errorf("%s: categories %v, generation %v", tt.name, r.Categories, r.TrackGeneration)
		}
		if r.Validate == nil || r.ValidateUpdate == nil || (r.HasSubresource("status") && (r.PrepareForStatusUpdate == nil || r.ValidateStatusUpdate == nil)) {
			t.Errorf("%s: missing hooks", tt.name)
		}
	}
}

// TestStoredVersions: a resource served in a second version or group is
// kept as its storage version's objects, as upstream does.
func TestStoredVersions(t *testing.T) {
	for _, tt := range []struct{ gv, name, storedGV string }{
		{"autoscaling/v1", "horizontalpodautoscalers", "autoscaling/v2"},
		{"events.k8s.io/v1", "events", "v1"},
	} {
		r := resourceByVersion(t, tt.gv, tt.name)
		if r.Stored == nil || r.Convert == nil {
			t.Fatalf("%s %s: not stored as another version", tt.gv, tt.name)
		}
		if got := r.StorageResource(); got.GroupVersion.String() != tt.storedGV || got.Name != tt.name || got.Stored != nil {
			t.Errorf("%s %s: stored as %s %s", tt.gv, tt.name, got.GroupVersion, got.Name)
		}
	}
	for _, r := range All() {
		if r.Stored == nil && r.StorageResource() != r {
			t.Errorf("%s %s: storage resource is not itself", r.GroupVersion, r.Name)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestFields(t *testing.T) {
	pod := newPod(ctr("app", "nginx"))
	pod.Spec.NodeName = "n1"
	pod.Spec.HostNetwork = true
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.1.0.7"}}
	want := fields.Set{
		"spec.nodeName": "n1", "spec.restartPolicy": "", "spec.schedulerName": "", "spec.serviceAccountName": "",
		"spec.hostNetwork": "true", "status.phase": "Running", "status.podIP": "10.1.0.7", "status.nominatedNodeName": "",
	}
	if got := resourceByName(t, "pods").Fields(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("pod fields = %v", got)
	}
	ev := &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}, ReportingController: "kubelet", Type: "Warning"}
	if got := resourceByName(t, "events").Fields(ev); got["source"] != "kubelet" || got["involvedObject.kind"] != "Pod" || got["type"] != "Warning" {
		t.Errorf("event fields = %v", got)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	if got := resourceByName(t, "nodes").Fields(node); got["spec.unschedulable"] != "true" {
		t.Errorf("node fields = %v", got)
	}
}

// Only kinds whose upstream strategy warns get warning hooks: the others'
// writes are not converted again for nothing.
func TestWarningHooks(t *testing.T) {
	warned := map[string]bool{"pods": true, "podtemplates": true, "replicationcontrollers": true, "services": true,
		"persistentvolumeclaims": true, "deployments": true, "replicasets": true, "daemonsets": true,
		"statefulsets": true, "jobs": true, "cronjobs": true, "resourcequotas": true,
		"mutatingwebhookconfigurations": true, "validatingwebhookconfigurations": true, "runtimeclasses": true,
		"customresourcedefinitions": true}
	for _, r := range All() {
		if got := r.WarningsOnCreate != nil && r.WarningsOnUpdate != nil; got != warned[r.Name] {
			t.Errorf("%s %s: warning hooks %v, want %v", r.GroupVersion, r.Name, got, warned[r.Name])
		}
	}
}
