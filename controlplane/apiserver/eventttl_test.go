package apiserver

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodelet/nodelet/controlplane/storage"
)

// TestEventTTL: a sweep deletes the Events last recorded before its
// cutoff, keeps one recorded after it, and watchers see the delete.
func TestEventTTL(t *testing.T) {
	env := newTestEnv(t, storage.HubOptions{}, nil)
	events := env.clientset(t).CoreV1().Events("default")
	ctx := context.Background()
	now := time.Now()
	mk := func(name string, last time.Time) {
		t.Helper()
		_, err := events.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
			Reason:         "Tested", Message: "m", Type: corev1.EventTypeNormal, Count: 1,
			FirstTimestamp: metav1.NewTime(last), LastTimestamp: metav1.NewTime(last)}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("old", now)
	mk("recorded-later", now.Add(2*time.Minute))
	w, err := events.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	n, err := env.srv.expireEvents(ctx, now.Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("expireEvents: %d, %v; want 1 deleted", n, err)
	}
	if _, err := events.Get(ctx, "old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("old event: %v, want gone", err)
	}
	if _, err := events.Get(ctx, "recorded-later", metav1.GetOptions{}); err != nil {
		t.Fatalf("an event recorded after the cutoff: %v", err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if e, ok := ev.Object.(*corev1.Event); ok && ev.Type == watch.Deleted && e.Name == "old" {
				return
			}
		case <-deadline:
			t.Fatal("no DELETED event for the expired Event")
		}
	}
}
