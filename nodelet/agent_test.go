package nodelet

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/test/testkit"
)

func TestAgentPodLifecycle(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
		env := startAgent(t, base)
		created, err := env.client.CoreV1().Pods("default").Create(t.Context(), agentPod("bb"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur := waitRunning(t, env, created.Name)
		if ip, err := netip.ParseAddr(cur.Status.PodIP); err != nil || !netip.MustParsePrefix(podCIDR).Contains(ip) {
			t.Errorf("pod IP %q not in %s (%v)", cur.Status.PodIP, podCIDR, err)
		}
		node, err := env.client.CoreV1().Nodes().Get(t.Context(), agentNode, metav1.GetOptions{})
		if err != nil {
			t.Errorf("node not registered: %v", err)
		} else if c := node.Status.Conditions; len(c) == 0 || c[len(c)-1].Type != corev1.NodeReady || c[len(c)-1].Status != corev1.ConditionTrue {
			t.Errorf("node not Ready: %+v", c)
		}
		deleteAndWait(t, env, created.Name)
		waitClean(t, env, true, created) // SyncTerminatedPod may still run
		env.stop()
		for _, p := range agentLeftovers(t, env, true, created) {
			t.Error(p)
		}
	})
}

// TestAgentRestart: a stopped nodelet leaves its pods running; started
// again, it restarts none of them and removes the pod deleted meanwhile.
func TestAgentRestart(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
		env := startAgent(t, base)
		pods := env.client.CoreV1().Pods("default")
		var keep, gone *corev1.Pod
		for _, pp := range []**corev1.Pod{&keep, &gone} {
			name := map[**corev1.Pod]string{&keep: "keep", &gone: "gone"}[pp]
			p, err := pods.Create(t.Context(), agentPod(name), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			*pp = waitRunning(t, env, p.Name)
		}
		env.stop()
		before := runningContainers(t, env)
		if len(before[string(keep.UID)]) != 1 || len(before[string(gone.UID)]) != 1 {
			t.Fatalf("after the nodelet stopped, running containers: %v", before)
		}
		zero := int64(0)
		if err := pods.Delete(t.Context(), gone.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(t.Context(), gone.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("force-deleted pod still in the API: %v", err)
		}

		env.start(t)
		if left := waitClean(t, env, false, gone); len(left) != 0 {
			t.Errorf("orphan not removed after restart: %v", left)
		}
		cur := waitRunning(t, env, keep.Name)
		after := runningContainers(t, env)
		if fmt.Sprint(after[string(keep.UID)]) != fmt.Sprint(before[string(keep.UID)]) {
			t.Errorf("kept pod's containers changed across the restart: %v -> %v", before[string(keep.UID)], after[string(keep.UID)])
		}
		if rc := cur.Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("kept pod restartCount %d", rc)
		}
		deleteAndWait(t, env, keep.Name)
		waitClean(t, env, true, keep)
		env.stop()
		for _, p := range agentLeftovers(t, env, true, keep, gone) {
			t.Error(p)
		}
	})
}

// Env from ConfigMaps and Secrets (keys and envFrom) reaches the process;
// a pod naming a missing ConfigMap waits with a reason and does not run.
func TestAgentEnvFromConfigMapsAndSecrets(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
		env := startAgent(t, base)
		ctx := t.Context()
		_, err := env.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello", "MODE": "fast"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"token": []byte("s3cret")}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := agentPod("envpod")
		c := &pod.Spec.Containers[0]
		c.Command = []string{"sh", "-c", "echo GREETING=$GREETING TOKEN=$TOKEN MODE=$MODE; trap 'exit 0' TERM; while true; do sleep 1; done"}
		c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
		c.Env = []corev1.EnvVar{
			{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "token"}}},
		}
		created, err := env.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitRunning(t, env, created.Name)
		logPath := runtime.ContainerLogPath(env.cfg.LogRoot, "default", created.Name, string(created.UID), "app", 0)
		deadline := time.Now().Add(10 * time.Second)
		for {
			data, _ := os.ReadFile(logPath)
			if strings.Contains(string(data), "GREETING=hello TOKEN=s3cret MODE=fast") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("container log %s lacks the env values:\n%s", logPath, data)
			}
			time.Sleep(100 * time.Millisecond)
		}

		missing := agentPod("missingcfg")
		missing.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}}}
		if _, err := env.client.CoreV1().Pods("default").Create(ctx, missing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var waiting *corev1.ContainerStateWaiting
		for start := time.Now(); waiting == nil || waiting.Reason != "CreateContainerConfigError"; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("pod with a missing ConfigMap: want waiting CreateContainerConfigError, have %+v", waiting)
			}
			cur, err := env.client.CoreV1().Pods("default").Get(ctx, missing.Name, metav1.GetOptions{})
			if err == nil && len(cur.Status.ContainerStatuses) == 1 {
				waiting = cur.Status.ContainerStatuses[0].State.Waiting
			}
		}
		if !strings.Contains(waiting.Message, "nope") {
			t.Errorf("waiting message does not name the ConfigMap: %q", waiting.Message)
		}
		deleteAndWait(t, env, created.Name)
		deleteAndWait(t, env, missing.Name)
	})
}

// Terminated containers report their exit code, reason and termination
// message: from the file behind terminationMessagePath, or from the log
// with FallbackToLogsOnError.
func TestAgentTerminationMessages(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
		env := startAgent(t, base)
		pod := agentPod("ends")
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		pod.Spec.Containers = []corev1.Container{
			{Name: "file", Image: "busybox:1.36", TerminationMessagePath: "/dev/termination-log",
				Command: []string{"sh", "-c", "printf bye > /dev/termination-log; exit 3"}},
			{Name: "logs", Image: "busybox:1.36", TerminationMessagePath: "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Command:                  []string{"sh", "-c", "echo oops; exit 1"}},
		}
		created, err := env.client.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cur *corev1.Pod
		for start := time.Now(); cur == nil || cur.Status.Phase != corev1.PodFailed; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > 60*time.Second {
				t.Fatalf("pod not Failed after 60s: %+v", cur.Status)
			}
			cur, _ = env.client.CoreV1().Pods("default").Get(t.Context(), created.Name, metav1.GetOptions{})
		}
		want := map[string]corev1.ContainerStateTerminated{
			"file": {ExitCode: 3, Reason: "Error", Message: "bye"},
			"logs": {ExitCode: 1, Reason: "Error", Message: "oops\n"},
		}
		for _, cs := range cur.Status.ContainerStatuses {
			term, w := cs.State.Terminated, want[cs.Name]
			if term == nil || term.ExitCode != w.ExitCode || term.Reason != w.Reason || term.Message != w.Message {
				t.Errorf("container %s: terminated %+v, want exit %d reason %s message %q", cs.Name, term, w.ExitCode, w.Reason, w.Message)
			}
		}
		deleteAndWait(t, env, created.Name)
		if left := waitClean(t, env, false, created); len(left) > 0 {
			t.Errorf("left after delete: %v", left)
		}
	})
}

// A pod that does not fit the node (cpu beyond allocatable, a host port
// already taken) is set Failed with upstream's reason and never started.
func TestAgentAdmission(t *testing.T) {
	testkit.InPodNode(t, func(t *testing.T, base string) {
		env := startAgent(t, base)
		pods := env.client.CoreV1().Pods("default")
		first := agentPod("port-a")
		first.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 18080, Protocol: corev1.ProtocolTCP}}
		if _, err := pods.Create(t.Context(), first, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, env, first.Name)

		second := agentPod("port-b")
		second.Spec.Containers[0].Ports = first.Spec.Containers[0].Ports
		huge := agentPod("huge")
		huge.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
		for want, p := range map[string]*corev1.Pod{"NodePorts": second, "OutOfcpu": huge} {
			if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var cur *corev1.Pod
			for start := time.Now(); cur == nil || cur.Status.Phase != corev1.PodFailed; time.Sleep(100 * time.Millisecond) {
				if time.Since(start) > 30*time.Second {
					t.Fatalf("pod %s not rejected after 30s: %+v", p.Name, cur.Status)
				}
				cur, _ = pods.Get(t.Context(), p.Name, metav1.GetOptions{})
			}
			if cur.Status.Reason != want || !strings.Contains(cur.Status.Message, "Pod was rejected") {
				t.Errorf("pod %s: reason %q message %q, want %s", p.Name, cur.Status.Reason, cur.Status.Message, want)
			}
			if len(runningContainers(t, env)[string(cur.UID)]) > 0 {
				t.Errorf("rejected pod %s has containers", p.Name)
			}
		}
		for _, name := range []string{first.Name, second.Name, huge.Name} {
			deleteAndWait(t, env, name)
		}
	})
}
