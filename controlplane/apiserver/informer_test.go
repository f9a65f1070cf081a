package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/controlplane/storage"
	"github.com/nodelet/nodelet/test/testkit"
)

// TestInformerSurvivesCompaction runs a client-go informer, cuts its watch
// off while more changes happen than the watch history holds, and checks
// that it gets 410 Expired, relists, and ends up with the truth.
func TestInformerSurvivesCompaction(t *testing.T) {
	var closed atomic.Bool
	var lists atomic.Int32
	env := newTestEnv(t, storage.HubOptions{History: 20}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A relist is a LIST, or (client-go's watch-list) a watch that
			// asks for the initial state.
			q := r.URL.Query()
			if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/default/configmaps" &&
				(q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") {
				lists.Add(1)
			}
			if closed.Load() && r.Header.Get("X-Test-Writer") == "" {
				// 429 makes the reflector retry its watch from the same
				// resourceVersion instead of relisting.
				writeError(w, apierrors.NewTooManyRequests("closed by the test", 0))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	cs := env.clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	seen := map[string]string{} // name -> last event
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	record := func(ev string) func(obj any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			mu.Lock()
			seen[obj.(*corev1.ConfigMap).Name] = ev
			mu.Unlock()
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record("add"),
		UpdateFunc: func(_, obj any) { record("update")(obj) },
		DeleteFunc: record("delete"),
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	cms := cs.CoreV1().ConfigMaps("default")
	mk := func(name string) {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("first")
	mk("doomed")
	testkit.Eventually(t, 60*time.Second, "add events", func() bool { return seenIs(&mu, seen, "first", "add") && seenIs(&mu, seen, "doomed", "add") })
	cm, _ := cms.Get(ctx, "first", metav1.GetOptions{})
	cm.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "update event", func() bool { return seenIs(&mu, seen, "first", "update") })

	// Cut the informer off and make more changes than the history keeps.
	closed.Store(true)
	env.ts.CloseClientConnections()
	writerCfg := *env.config
	writerCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return headerRT{rt} }
	writerCfg.Dial = (&net.Dialer{}).DialContext // a transport of its own, not the one just cut
	writer := newClientset(t, &writerCfg)
	for i := 0; i < 50; i++ {
		if _, err := writer.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("late-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.CoreV1().ConfigMaps("default").Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	listsBefore := lists.Load()
	closed.Store(false)

	testkit.Eventually(t, 60*time.Second, "informer to catch up after 410", func() bool {
		return len(inf.GetStore().ListKeys()) == 51 && seenIs(&mu, seen, "doomed", "delete") && seenIs(&mu, seen, "late-49", "add")
	})
	if lists.Load() <= listsBefore {
		t.Fatalf("the informer caught up without relisting: the 410 path was not exercised")
	}
}

type headerRT struct{ rt http.RoundTripper }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Writer", "1")
	return h.rt.RoundTrip(r)
}

func seenIs(mu *sync.Mutex, seen map[string]string, name, ev string) bool {
	mu.Lock()
	defer mu.Unlock()
	return seen[name] == ev
}
