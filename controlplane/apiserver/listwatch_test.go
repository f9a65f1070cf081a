package apiserver

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodelet/nodelet/controlplane/storage"
)

func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, name(&items[i]))
	}
	sort.Strings(out)
	return out
}

func podNames(l *corev1.PodList) []string {
	return names(l.Items, func(p *corev1.Pod) string { return p.Name })
}

func cmNames(l *corev1.ConfigMapList) []string {
	return names(l.Items, func(c *corev1.ConfigMap) string { return c.Namespace + "/" + c.Name })
}

func TestListSelectors(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	mkNamespace(t, cs, "other")
	cms := cs.CoreV1().ConfigMaps("default")
	for _, c := range []struct {
		ns, name, tier string
	}{{"default", "a1", "a"}, {"default", "a2", "a"}, {"default", "b1", "b"}, {"other", "a3", "a"}, {"other", "c1", "c"}} {
		if _, err := cs.CoreV1().ConfigMaps(c.ns).Create(ctx, testConfigMap(c.name, map[string]string{"tier": c.tier, "test": "sel"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("labelSelector", func(t *testing.T) {
		for sel, want := range map[string][]string{
			"tier=a":               {"default/a1", "default/a2"},
			"tier!=a,test=sel":     {"default/b1"},
			"tier in (a,b)":        {"default/a1", "default/a2", "default/b1"},
			"tier=zzz":             {},
			"test=sel,!nosuchkey":  {"default/a1", "default/a2", "default/b1"},
			"tier notin (a),test":  {"default/b1"},
			"test=sel,tier in (b)": {"default/b1"},
		} {
			l, err := cms.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				t.Fatalf("%q: %v", sel, err)
			}
			if got := cmNames(l); !slices.Equal(got, want) {
				t.Errorf("labelSelector %q: got %v, want %v", sel, got, want)
			}
		}
		_, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "tier in (a"})
		wantStatus(t, "malformed labelSelector", err, 400)
	})

	t.Run("all namespaces", func(t *testing.T) {
		l, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "tier=a"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cmNames(l), []string{"default/a1", "default/a2", "other/a3"}; !slices.Equal(got, want) {
			t.Errorf("all-namespaces list: got %v, want %v", got, want)
		}
		l, err = cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=other", LabelSelector: "test=sel"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cmNames(l), []string{"other/a3", "other/c1"}; !slices.Equal(got, want) {
			t.Errorf("metadata.namespace field selector: got %v, want %v", got, want)
		}
	})

	t.Run("pod fieldSelector", func(t *testing.T) {
		pods := cs.CoreV1().Pods("default")
		for _, p := range []*corev1.Pod{testPod("on1", "node-1"), testPod("on2", "node-2"), testPod("nowhere", "")} {
			if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		done, err := pods.Get(ctx, "on2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done.Status.Phase = corev1.PodSucceeded
		if _, err := pods.UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for sel, want := range map[string][]string{
			"metadata.name=on1":                      {"on1"},
			"spec.nodeName=node-1":                   {"on1"},
			"spec.nodeName=":                         {"nowhere"},
			"spec.nodeName!=":                        {"on1", "on2"},
			"status.phase=Pending":                   {"nowhere", "on1"},
			"status.phase!=Pending":                  {"on2"},
			"status.phase=Pending,spec.nodeName!=":   {"on1"},
			"metadata.name=on1,spec.nodeName=node-2": {},
		} {
			l, err := pods.List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Fatalf("%q: %v", sel, err)
			}
			if got := podNames(l); !slices.Equal(got, want) {
				t.Errorf("fieldSelector %q: got %v, want %v", sel, got, want)
			}
		}
		_, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.containers=x"})
		wantStatus(t, "unsupported pod field", err, 400)
		_, err = cms.List(ctx, metav1.ListOptions{FieldSelector: "data.key=x"})
		wantStatus(t, "unsupported configmap field", err, 400)
	})

	t.Run("event fieldSelector", func(t *testing.T) {
		events := cs.CoreV1().Events("default")
		for i, obj := range []string{"on1", "on2", "on1"} {
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("ev-%d", i)},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: obj},
				Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal,
				Source: corev1.EventSource{Component: "test"}, Count: 1,
			}
			if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		l, err := events.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=on1"})
		if err != nil {
			t.Fatal(err)
		}
		got := names(l.Items, func(e *corev1.Event) string { return e.Name })
		if want := []string{"ev-0", "ev-2"}; !slices.Equal(got, want) {
			t.Errorf("events for on1: got %v, want %v", got, want)
		}
		l, err = events.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=on2,source=test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 || l.Items[0].Name != "ev-1" {
			t.Errorf("events for on2: got %v", l.Items)
		}
	})
}

func TestListPagination(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	mkNamespace(t, cs, "page")
	mkNamespace(t, cs, "page2")
	cms := cs.CoreV1().ConfigMaps("page")
	want := []string{}
	for i := 0; i < 11; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		lbl := map[string]string{"odd": fmt.Sprint(i%2 == 1)}
		if _, err := cms.Create(ctx, testConfigMap(name, lbl), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("page2").Create(ctx, testConfigMap(name, lbl), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, "page/"+name)
	}

	collect := func(t *testing.T, ns string, opts metav1.ListOptions) ([]string, int) {
		t.Helper()
		var got []string
		pages := 0
		for {
			l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if int64(len(l.Items)) > opts.Limit {
				t.Fatalf("page of %d items with limit %d", len(l.Items), opts.Limit)
			}
			if l.ResourceVersion == "" {
				t.Error("list page without a resourceVersion")
			}
			for _, c := range l.Items {
				got = append(got, c.Namespace+"/"+c.Name)
			}
			if l.Continue == "" {
				break
			}
			if pages > 50 {
				t.Fatal("pagination does not end")
			}
			opts.Continue = l.Continue
		}
		return got, pages
	}

	got, pages := collect(t, "page", metav1.ListOptions{Limit: 3})
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("paged list: got %v, want %v", got, want)
	}
	if pages != 4 {
		t.Errorf("11 items with limit 3 took %d pages, want 4", pages)
	}

	// With a selector, every match once.
	got, _ = collect(t, "page", metav1.ListOptions{Limit: 2, LabelSelector: "odd=true"})
	if len(got) != 5 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 5 {
		t.Errorf("paged list with selector: got %v, want the 5 odd ones once", got)
	}

	// Across all namespaces.
	got, _ = collect(t, "", metav1.ListOptions{Limit: 4, LabelSelector: "odd"})
	if len(got) != 22 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 22 {
		t.Errorf("paged all-namespaces list: got %d items (%v), want 22 distinct", len(got), got)
	}

	// A limit covering everything leaves no continue token.
	l, err := cms.List(ctx, metav1.ListOptions{Limit: 11})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 11 || l.Continue != "" {
		t.Errorf("limit 11 of 11: %d items, continue %q", len(l.Items), l.Continue)
	}

	_, err = cms.List(ctx, metav1.ListOptions{Limit: 3, Continue: "garbage!"})
	wantStatus(t, "invalid continue token", err, 400, 410)
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed early")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a watch event")
	}
	return watch.Event{}
}

func expectEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) *corev1.ConfigMap {
	t.Helper()
	ev := nextEvent(t, w)
	cm, ok := ev.Object.(*corev1.ConfigMap)
	if ev.Type != typ || !ok || cm.Name != name {
		t.Fatalf("got event %s %T %v, want %s %s", ev.Type, ev.Object, objName(ev.Object), typ, name)
	}
	return cm
}

func objName(o any) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetName()
	}
	return fmt.Sprintf("%+v", o)
}

func expectNoEvent(t *testing.T, w watch.Interface) {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("unexpected event %s %v", ev.Type, objName(ev.Object))
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWatchSemantics(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	mkNamespace(t, cs, "w")
	cms := cs.CoreV1().ConfigMaps("w")

	t.Run("from resourceVersion", func(t *testing.T) {
		seed, err := cms.Create(ctx, testConfigMap("seed", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: seed.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created, err := cms.Create(ctx, testConfigMap("x", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Data = map[string]string{"k": "v"}
		updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, "x", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		a := expectEvent(t, w, watch.Added, "x")
		m := expectEvent(t, w, watch.Modified, "x")
		d := expectEvent(t, w, watch.Deleted, "x")
		if a.ResourceVersion != created.ResourceVersion || m.ResourceVersion != updated.ResourceVersion {
			t.Errorf("event resourceVersions %s/%s, want %s/%s", a.ResourceVersion, m.ResourceVersion, created.ResourceVersion, updated.ResourceVersion)
		}
		if m.Data["k"] != "v" {
			t.Errorf("MODIFIED carries %v", m.Data)
		}
		if rvInt(t, d.ResourceVersion) <= rvInt(t, m.ResourceVersion) {
			t.Errorf("DELETED resourceVersion %s not after %s", d.ResourceVersion, m.ResourceVersion)
		}
		expectNoEvent(t, w)
	})

	t.Run("label selector transitions", func(t *testing.T) {
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, LabelSelector: "app=x"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		cm, err := cms.Create(ctx, testConfigMap("sel", map[string]string{"app": "x"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cms.Create(ctx, testConfigMap("other", map[string]string{"app": "y"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, w, watch.Added, "sel")
		cm.Labels["app"] = "y"
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, w, watch.Deleted, "sel")
		cm.Data = map[string]string{"unseen": "change"}
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cm.Labels["app"] = "x"
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, w, watch.Added, "sel")
		cm.Data = map[string]string{"seen": "change"}
		if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, w, watch.Modified, "sel")
		if err := cms.Delete(ctx, "sel", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, w, watch.Deleted, "sel")
		expectNoEvent(t, w)
	})

	t.Run("resourceVersion 0 sends current state", func(t *testing.T) {
		mkNamespace(t, cs, "w0")
		c0 := cs.CoreV1().ConfigMaps("w0")
		for _, n := range []string{"one", "two"} {
			if _, err := c0.Create(ctx, testConfigMap(n, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		w, err := c0.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		got := map[string]bool{}
		for i := 0; i < 2; i++ {
			ev := nextEvent(t, w)
			if ev.Type != watch.Added {
				t.Fatalf("initial event %d is %s, want ADDED", i, ev.Type)
			}
			got[objName(ev.Object)] = true
		}
		if !got["one"] || !got["two"] {
			t.Errorf("initial events for %v, want one and two", got)
		}
		if _, err := c0.Create(ctx, testConfigMap("three", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := nextEvent(t, w)
		if ev.Type != watch.Added || objName(ev.Object) != "three" {
			t.Errorf("then %s %s, want ADDED three", ev.Type, objName(ev.Object))
		}
	})

	t.Run("sendInitialEvents ends with a bookmark", func(t *testing.T) {
		mkNamespace(t, cs, "wi")
		ci := cs.CoreV1().ConfigMaps("wi")
		var last string
		for _, n := range []string{"one", "two", "three"} {
			cm, err := ci.Create(ctx, testConfigMap(n, nil), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last = cm.ResourceVersion
		}
		yes := true
		w, err := ci.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		got := map[string]bool{}
		for {
			ev := nextEvent(t, w)
			if ev.Type == watch.Bookmark {
				cm := ev.Object.(*corev1.ConfigMap)
				if cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					t.Errorf("bookmark annotations = %v, want %s=true", cm.Annotations, metav1.InitialEventsAnnotationKey)
				}
				if rvInt(t, cm.ResourceVersion) < rvInt(t, last) {
					t.Errorf("bookmark resourceVersion %s older than the last write %s", cm.ResourceVersion, last)
				}
				break
			}
			if ev.Type != watch.Added {
				t.Fatalf("initial event %s, want ADDED or BOOKMARK", ev.Type)
			}
			got[objName(ev.Object)] = true
		}
		if len(got) != 3 {
			t.Errorf("initial events for %v, want 3 objects", got)
		}
		if _, err := ci.Create(ctx, testConfigMap("four", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, w, watch.Added, "four")
	})
}

func TestWatchExpired(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{History: 5}, nil)
	cs := env.clientset(t)
	ctx := testCtx(t)
	cms := cs.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, testConfigMap("churn", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := cm.ResourceVersion
	for i := 0; i < 20; i++ {
		cm.Data = map[string]string{"i": fmt.Sprint(i)}
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: old})
	if err != nil {
		t.Fatalf("watch from a compacted revision failed before streaming: %v", err)
	}
	defer w.Stop()
	ev := nextEvent(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok {
		t.Fatalf("got %s %T, want ERROR with a Status", ev.Type, ev.Object)
	}
	if st.Code != 410 || (st.Reason != metav1.StatusReasonExpired && st.Reason != metav1.StatusReasonGone) {
		t.Errorf("status code %d reason %s, want 410 Expired", st.Code, st.Reason)
	}

	// A recent revision still works.
	w2, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	cm.Data = map[string]string{"final": "yes"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, w2, watch.Modified, "churn")
}
