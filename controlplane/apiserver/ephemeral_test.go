package apiserver

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestEphemeralContainersSubresource: pods/ephemeralcontainers changes
// spec.ephemeralContainers and nothing else, with upstream's validation;
// the main resource cannot add them. kubectl debug patches it so.
func TestEphemeralContainersSubresource(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	debugger := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox", Stdin: true, TTY: true}, TargetContainerName: "web"}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]string{"sneaky": "yes"}},
		"spec": map[string]any{"ephemeralContainers": []corev1.EphemeralContainer{debugger},
			"containers": []map[string]string{{"name": "web", "image": "httpd"}}},
	})
	out, err := pods.Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "ephemeralcontainers")
	if err != nil {
		t.Fatalf("patch pods/ephemeralcontainers: %v", err)
	}
	// Defaulted as upstream decodes them (kubectl debug sends no pull policy).
	if len(out.Spec.EphemeralContainers) != 1 || out.Spec.EphemeralContainers[0].Name != "debugger" ||
		out.Spec.EphemeralContainers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("ephemeral containers %+v", out.Spec.EphemeralContainers)
	}
	if out.Labels["sneaky"] != "" || out.Spec.Containers[0].Image != "nginx" {
		t.Errorf("the subresource changed more than ephemeral containers: labels %v, image %s", out.Labels, out.Spec.Containers[0].Image)
	}

	// Removing or changing one is refused (upstream: they may only be added).
	cur, err := pods.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.EphemeralContainers = nil
	_, err = pods.UpdateEphemeralContainers(ctx, "web", cur, metav1.UpdateOptions{})
	wantStatus(t, "removing an ephemeral container", err, 422)

	// A name taken by a container is refused.
	cur, _ = pods.Get(ctx, "web", metav1.GetOptions{})
	clash := debugger
	clash.Name = "web"
	cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, clash)
	_, err = pods.UpdateEphemeralContainers(ctx, "web", cur, metav1.UpdateOptions{})
	wantStatus(t, "an ephemeral container named as a container", err, 422)

	// The main resource may not add one.
	cur, _ = pods.Get(ctx, "web", metav1.GetOptions{})
	second := debugger
	second.Name = "debugger-2"
	cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, second)
	_, err = pods.Update(ctx, cur, metav1.UpdateOptions{})
	wantStatus(t, "adding an ephemeral container through the pod", err, 422)
}
