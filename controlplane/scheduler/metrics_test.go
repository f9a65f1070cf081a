package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodelet/nodelet/controlplane/controlplanetest"
	"github.com/nodelet/nodelet/controlplane/scheduler"
	"github.com/nodelet/nodelet/test/testkit"
)

func TestSchedulerMetrics(t *testing.T) {
	srv := controlplanetest.Start(t, controlplanetest.Options{})
	cs := srv.Clientset(t)
	createNodes(t, cs, testNode("n1", "2", "4Gi"))
	reg := prometheus.NewRegistry()
	m, err := scheduler.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	factory := informers.NewSharedInformerFactory(cs, 0)
	s, err := scheduler.New(scheduler.Config{Client: cs, Informers: factory, Metrics: m,
		Recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "default-scheduler"}),
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	createPods(t, cs, testPod("fits", "100m", ""), testPod("too-big", "8", ""))
	waitPod(t, cs, "fits", "binding", bound)
	attempts := func(result string) float64 {
		return testutil.ToFloat64(m.Attempts(result, "default-scheduler"))
	}
	testkit.Eventually(t, 15*time.Second, "one scheduled attempt and an unschedulable one", func() (bool, error) {
		if attempts("scheduled") == 1 && attempts("unschedulable") >= 1 {
			return true, nil
		}
		return false, fmt.Errorf("attempts: scheduled %v, unschedulable %v, error %v", attempts("scheduled"), attempts("unschedulable"), attempts("error"))
	})
	if n := testutil.CollectAndCount(reg, "scheduler_scheduling_attempt_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want one per result", n)
	}
	// The too-big pod is the only one pending (in whichever part of the
	// queue the node and pod events have moved it to).
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var pending float64
	var series int
	for _, mf := range mfs {
		if mf.GetName() == "scheduler_pending_pods" {
			for _, s := range mf.GetMetric() {
				pending += s.GetGauge().GetValue()
				series++
			}
		}
	}
	if series != 3 || pending != 1 {
		t.Errorf("scheduler_pending_pods: %d series summing to %v, want 3 summing to 1", series, pending)
	}
}
