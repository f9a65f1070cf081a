package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/testkit"
)

// TestWorkloadKinds applies the documentation's examples of every workload
// kind and reads them back as kubectl users see them: upstream's columns,
// the all category, the scale subresource, the system priority classes and
// upstream's validation errors.
func TestWorkloadKinds(t *testing.T) {
	cp := startControlPlane(t, t.TempDir(), freePort(t))
	out := cp.must("apply", "-f", "testdata/workloads.yaml")
	for _, want := range []string{"service/nginx created", "statefulset.apps/web created",
		"daemonset.apps/fluentd-elasticsearch created", "job.batch/pi created", "cronjob.batch/hello created",
		"replicationcontroller/nginx created", "podtemplate/nginx created",
		"poddisruptionbudget.policy/zk-pdb created", "priorityclass.scheduling.k8s.io/high-priority created"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply lacks %q:\n%s", want, out)
		}
	}
	// A second apply changes nothing. kubectl still sends (and reports
	// "configured" for) a patch where its client-side diff cannot see that:
	// the StatefulSet's volumeClaimTemplates (an atomic list the server
	// defaults), the PDB's selector (patchStrategy replace), the
	// PriorityClass's globalDefault: false (omitted when false), as against
	// kube-apiserver; the server stores nothing new.
	if out = cp.must("apply", "-f", "testdata/workloads.yaml"); strings.Count(out, "unchanged") != 6 {
		t.Fatalf("second apply:\n%s", out)
	}
	if out = cp.must("get", "sts/web", "pdb/zk-pdb", "pc/high-priority", "-o", "jsonpath={.items[*].metadata.generation}"); out != "1 1 1" {
		t.Fatalf("generations after a second apply: %q", out)
	}
	// Upstream's controllers act on the objects: the replication
	// controller creates its three pods (no node runs them), the stateful
	// set its first pod and that pod's claim.
	testkit.Eventually(t, 30*time.Second, "rc nginx's pods and web-0's claim", func() bool {
		out, _, _ := cp.kubectl("get", "rc/nginx", "pvc/www-web-0", "-o", "jsonpath={.items[*].status.replicas}")
		return out == "3"
	})
	for _, c := range []struct{ args, header, row string }{
		{"statefulsets", "NAME READY AGE", "web 0/2"},
		{"daemonsets -n kube-system", "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE", "fluentd-elasticsearch 0 0 0 0 0 <none>"},
		{"jobs", "NAME STATUS COMPLETIONS DURATION AGE", "pi Running 0/1"},
		// (ACTIVE and LAST SCHEDULE change if the test crosses a minute)
		{"cronjobs", "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE", "hello * * * * * <none> False"},
		{"rc", "NAME DESIRED CURRENT READY AGE", "nginx 3 3 0"},
		{"pvc", "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE", "www-web-0 Pending local-path <unset>"}, // the default class (DefaultStorageClass)
		{"podtemplates", "NAME CONTAINERS IMAGES POD LABELS", "nginx nginx nginx app=nginx-rc"},
		{"pdb", "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE", "zk-pdb 2 N/A 0"},
		{"pc high-priority", "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY", "high-priority 1000000 false"},
		{"sts web -o wide", "NAME READY AGE CONTAINERS IMAGES", "web 0/2"},
	} {
		lines := strings.Split(strings.TrimSpace(cp.must(strings.Fields("get "+c.args)...)), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != c.header ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), c.row) {
			t.Errorf("kubectl get %s:\n%s\nwant header %q and a row starting %q", c.args, strings.Join(lines, "\n"), c.header, c.row)
		}
	}

	// The all category holds what upstream puts in it, nothing else.
	out = cp.must("get", "all", "-A", "-o", "name")
	for _, want := range []string{"service/nginx", "statefulset.apps/web", "daemonset.apps/fluentd-elasticsearch",
		"job.batch/pi", "cronjob.batch/hello", "replicationcontroller/nginx"} {
		if !strings.Contains(out, want) {
			t.Errorf("get all lacks %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"podtemplate", "poddisruptionbudget", "priorityclass", "controllerrevision"} {
		if strings.Contains(out, not) {
			t.Errorf("get all lists %s:\n%s", not, out)
		}
	}

	testWorkloadScale(t, cp)

	out = cp.must("get", "priorityclasses", "-o", "custom-columns=NAME:.metadata.name,VALUE:.value", "--no-headers")
	if !strings.Contains(out, "system-cluster-critical   2000000000") || !strings.Contains(out, "system-node-critical      2000001000") {
		t.Errorf("system priority classes:\n%s", out)
	}

	testWorkloadValidation(t, cp)
}

func testWorkloadScale(t *testing.T, cp *controlPlane) {
	t.Helper()
	if out := cp.must("scale", "statefulset/web", "--replicas=3"); !strings.Contains(out, "statefulset.apps/web scaled") {
		t.Fatalf("scale: %s", out)
	}
	if out := cp.must("get", "sts", "web", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); out != "3 2" {
		t.Errorf("after scale: replicas and generation %q, want \"3 2\"", out)
	}
	cp.must("scale", "rc/nginx", "--replicas=1")
	if out := cp.must("get", "rc", "nginx", "-o", "jsonpath={.spec.replicas}"); out != "1" {
		t.Errorf("rc replicas after scale: %q", out)
	}
	// Defaults and strategy rules stored with the objects.
	if out := cp.must("get", "job", "pi", "-o", "jsonpath={.spec.completions} {.spec.manualSelector} {.spec.template.metadata.labels.job-name}"); out != "1 false pi" {
		t.Errorf("job defaults and generated labels: %q", out)
	}
	out := cp.must("get", "ds", "-n", "kube-system", "fluentd-elasticsearch", "-o",
		`jsonpath={.metadata.annotations.deprecated\.daemonset\.template\.generation} {.spec.updateStrategy.type}`)
	if out != "1 RollingUpdate" {
		t.Errorf("daemonset template generation and strategy: %q", out)
	}
}

func testWorkloadValidation(t *testing.T, cp *controlPlane) {
	t.Helper()
	bad := "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: bad}\nspec:\n  replicas: -1\n  serviceName: nginx\n" +
		"  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, image: busybox}]}\n"
	_, errOut, err := cp.kubectlStdin(bad, "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, `The StatefulSet "bad" is invalid: spec.replicas: Invalid value: -1`) {
		t.Errorf("invalid statefulset: err=%v stderr=%s", err, errOut)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "always"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	_, err = cp.clientset().BatchV1().Jobs("default").Create(context.Background(), job, metav1.CreateOptions{})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity || status.Status().Details == nil ||
		len(status.Status().Details.Causes) != 1 || status.Status().Details.Causes[0].Field != "spec.template.spec.restartPolicy" {
		t.Errorf("job with restartPolicy Always: %v, want 422 on spec.template.spec.restartPolicy", err)
	}
}
