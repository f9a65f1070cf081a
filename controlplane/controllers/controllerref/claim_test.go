package controllerref

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name string, lbl string, owner types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("pod-" + name), Labels: map[string]string{"app": lbl}}}
	if owner != "" {
		t := true
		p.OwnerReferences = []metav1.OwnerReference{{UID: owner, Controller: &t, Name: "o", Kind: "ReplicaSet", APIVersion: "apps/v1"}}
	}
	return p
}

func TestClaim(t *testing.T) {
	owner := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "rs-uid"}}
	patched := map[string]string{}
	c := &Claimer[*corev1.Pod]{
		Owner:    owner,
		OwnerGVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		Selector: labels.SelectorFromSet(labels.Set{"app": "web"}),
		Fresh:    func(context.Context) (metav1.Object, error) { return owner, nil },
		Patch: func(_ context.Context, p *corev1.Pod, patch []byte) error {
			patched[p.Name] = string(patch)
			if p.Name == "gone" {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, p.Name)
			}
			return nil
		},
	}
	pods := []*corev1.Pod{
		pod("mine", "web", "rs-uid"),   // kept
		pod("strayed", "db", "rs-uid"), // released
		pod("orphan", "web", ""),       // adopted
		pod("other", "web", "someone"), // left alone
		pod("unrelated", "db", ""),     // left alone
		pod("gone", "web", ""),         // adoption finds it deleted
	}
	claimed, err := c.Claim(context.Background(), pods)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range claimed {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "mine,orphan" {
		t.Fatalf("claimed %v", names)
	}
	if len(patched) != 3 || patched["other"] != "" || patched["unrelated"] != "" {
		t.Fatalf("patched %v", patched)
	}
	var adopt struct {
		Metadata struct {
			UID             types.UID                `json:"uid"`
			OwnerReferences []map[string]interface{} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	json.Unmarshal([]byte(patched["orphan"]), &adopt)
	ref := adopt.Metadata.OwnerReferences[0]
	if adopt.Metadata.UID != "pod-orphan" || ref["uid"] != "rs-uid" || ref["kind"] != "ReplicaSet" || ref["apiVersion"] != "apps/v1" || ref["controller"] != true {
		t.Fatalf("adopt patch %s", patched["orphan"])
	}
	if !strings.Contains(patched["strayed"], `"$patch":"delete"`) {
		t.Fatalf("release patch %s", patched["strayed"])
	}
}

func TestNoAdoptionByDeletedOwner(t *testing.T) {
	owner := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "rs-uid"}}
	deleting := owner.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	patches, reads := 0, 0
	c := &Claimer[*corev1.Pod]{
		Owner: owner, OwnerGVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		Selector: labels.Everything(),
		Fresh:    func(context.Context) (metav1.Object, error) { reads++; return deleting, nil },
		Patch:    func(context.Context, *corev1.Pod, []byte) error { patches++; return nil },
	}
	claimed, err := c.Claim(context.Background(), []*corev1.Pod{pod("a", "x", ""), pod("b", "y", "")})
	if len(claimed) != 0 || patches != 0 || err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("claimed %d, patches %d, err %v", len(claimed), patches, err)
	}
	// The fresh read happens once, not once per orphan.
	if reads != 1 {
		t.Fatalf("owner read %d times", reads)
	}
}
