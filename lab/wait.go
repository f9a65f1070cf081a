package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// watched is a process a wait gives up on when it exits.
type watched struct {
	what string
	pid  int
	argv []string
	log  string
}

// exitError says which process exited and shows the end of its log.
func (w watched) exitError(waitingFor string) error {
	tail := "    " + strings.ReplaceAll(logTail(w.log, 20), "\n", "\n    ")
	return fmt.Errorf("%s (pid %d) exited while waiting for %s; its log %s ends:\n%s",
		w.what, w.pid, waitingFor, w.log, tail)
}

// waitFor polls check until it reports done, one of procs exits, ctx ends
// or timeout passes. The last error of check goes into the timeout error.
func waitFor(outer context.Context, what string, timeout time.Duration, procs []watched, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(outer, timeout)
	defer cancel()
	var last error
	for {
		for _, p := range procs {
			if !running(p.pid, p.argv) {
				return p.exitError(what)
			}
		}
		done, err := check(ctx)
		if done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if outer.Err() != nil { // Ctrl-C, not the timeout
				return fmt.Errorf("interrupted while waiting for %s: %w", what, outer.Err())
			}
			msg := fmt.Sprintf("timed out after %s waiting for %s", timeout, what)
			if last != nil {
				msg += fmt.Sprintf(" (last error: %v)", last)
			}
			var logs []string
			for _, p := range procs {
				logs = append(logs, p.log)
			}
			return fmt.Errorf("%s; logs: %s", msg, strings.Join(logs, ", "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	rc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	return cs, nil
}

// apiReady checks /readyz: through the forwarder, so it proves the host's
// path to the API server too.
func apiReady(cs *kubernetes.Clientset) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	}
}

// defaultAccountReady checks that the default namespace has its default
// ServiceAccount and kube-root-ca.crt, which the control plane's
// controllers create shortly after it starts: a pod created before them is
// refused by the ServiceAccount admission plugin or waits for its token
// volume, so the lab, as upstream's e2e framework, waits for both.
func defaultAccountReady(cs *kubernetes.Clientset) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if _, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, err
		}
		_, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	}
}

// nodesReady checks that every named Node exists with Ready=True.
func nodesReady(cs *kubernetes.Clientset, names []string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var ready []string
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = append(ready, n.Name)
				}
			}
		}
		for _, name := range names {
			if !slices.Contains(ready, name) {
				return false, fmt.Errorf("node %s is not Ready yet", name)
			}
		}
		return true, nil
	}
}
