package apiserver

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestMetadataWatchBookmarks: a metadata informer's watch (the garbage
// collector's) gets its bookmarks as PartialObjectMetadata too; a bookmark
// of the resource's own kind cannot be decoded by the metadata client and
// ended its watch every time one came.
func TestMetadataWatchBookmarks(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	mc, err := metadata.NewForConfig(env.config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	mkNamespace(t, env.clientset(t), "m")
	yes := true
	w, err := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("m").Watch(ctx, metav1.ListOptions{
		AllowWatchBookmarks: true, SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed before the initial-events bookmark")
			}
			switch ev.Type {
			case watch.Error:
				t.Fatalf("watch error: %v", ev.Object)
			case watch.Bookmark:
				m, ok := ev.Object.(*metav1.PartialObjectMetadata)
				if !ok {
					t.Fatalf("bookmark is %T, want *PartialObjectMetadata", ev.Object)
				}
				if m.Annotations[metav1.InitialEventsAnnotationKey] != "true" || m.ResourceVersion == "" {
					t.Errorf("initial-events bookmark %+v", m.ObjectMeta)
				}
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no bookmark within 10s")
		}
	}
}
