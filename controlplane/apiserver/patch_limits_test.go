package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestJSONPatchBounds: a JSON patch whose copies would grow the object
// without bound is refused (422) while the server's heap stays small,
// and one of more than 10,000 operations is refused with upstream's 413.
func TestJSONPatchBounds(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cms := env.clientset(t).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bomb"},
		Data: map[string]string{"k": strings.Repeat("x", 64<<10)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each copy doubles what the next one copies: 40 of them would be
	// 64 KiB * 2^40.
	var ops []string
	ops = append(ops, `{"op":"add","path":"/metadata/annotations","value":{}}`)
	ops = append(ops, `{"op":"copy","from":"/data","path":"/metadata/annotations/d0"}`)
	for i := 1; i < 40; i++ {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/metadata/annotations","path":"/metadata/annotations/d%d"}`, i))
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := cms.Patch(ctx, "bomb", types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{})
	// Upstream answers a failed JSON patch with a bare 422 (its message
	// does not say why); the reason is checked on applyPatch below.
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != 422 {
		t.Fatalf("patch bomb: %v, want 422", err)
	}
	cur, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "data": map[string]string{"k": strings.Repeat("x", 64<<10)}})
	p, err := jsonpatch.DecodePatch([]byte("[" + strings.Join(ops, ",") + "]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyJSONPatch(p, cur); err == nil || !strings.Contains(err.Error(), "copy") {
		t.Fatalf("applying the bomb: %v, want the copy limit", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 256<<20 {
		t.Fatalf("the heap grew by %d MiB on a refused patch", grown>>20)
	}

	many := make([]string, maxJSONPatchOperations+1)
	for i := range many {
		many[i] = `{"op":"test","path":"/metadata/name","value":"bomb"}`
	}
	_, err = cms.Patch(ctx, "bomb", types.JSONPatchType, []byte("["+strings.Join(many, ",")+"]"), metav1.PatchOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) || !strings.Contains(err.Error(), "The allowed maximum operations in a JSON patch is 10000, got 10001") {
		t.Fatalf("10001 operations: %v, want upstream's 413", err)
	}
}

// TestStoredSizeBound: however it grows (a create under the body limit,
// merge patches each small), an object larger than etcd's default request
// limit is refused with 413 and the stored one is unchanged.
func TestStoredSizeBound(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := context.Background()
	big := strings.Repeat("x", 2<<20)
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "i", Args: []string{big}}}}}}
	_, err := cs.CoreV1().PodTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) || !strings.Contains(err.Error(), "the limit is 1572864 bytes") {
		t.Fatalf("a 2 MiB object: %v, want 413", err)
	}
	tmpl.Template.Spec.Containers[0].Args = []string{"small"}
	if _, err := cs.CoreV1().PodTemplates("default").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("y", 1<<20)
	grow := fmt.Sprintf(`{"template":{"spec":{"containers":[{"name":"c","image":"i","args":["%s"]}]}}}`, chunk)
	if _, err := cs.CoreV1().PodTemplates("default").Patch(ctx, "big", types.MergePatchType, []byte(grow), metav1.PatchOptions{}); err != nil {
		t.Fatalf("a 1 MiB object: %v", err)
	}
	patch := fmt.Sprintf(`[{"op":"add","path":"/template/spec/containers/0/args/-","value":"%s"}]`, chunk)
	_, err = cs.CoreV1().PodTemplates("default").Patch(ctx, "big", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	if !apierrors.IsRequestEntityTooLargeError(err) {
		t.Fatalf("a patch growing it to 2 MiB: %v, want 413", err)
	}
	got, err := cs.CoreV1().PodTemplates("default").Get(ctx, "big", metav1.GetOptions{})
	if err != nil || len(got.Template.Spec.Containers[0].Args) != 1 {
		t.Fatalf("after the refused patch: %v, %d args", err, len(got.Template.Spec.Containers[0].Args))
	}
}
