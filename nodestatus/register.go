package nodestatus

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// registerWithRetry registers the node, backing off from 100 ms to 7 s
// between attempts as upstream's registerWithAPIServer.
func (s *Syncer) registerWithRetry(ctx context.Context) error {
	delay := 100 * time.Millisecond
	for {
		err := s.register(ctx)
		if err == nil {
			return nil
		}
		s.log.Error("register node", "err", err, "retry", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("register node %s: %w", s.cfg.NodeName, ctx.Err())
		case <-s.clock.After(delay):
		}
		delay = min(2*delay, 7*time.Second)
	}
}

// register creates the Node or, when it exists, reuses it and reconciles
// the default labels, as upstream's tryRegisterWithAPIServer.
func (s *Syncer) register(ctx context.Context) error {
	nodes := s.cfg.Client.CoreV1().Nodes()
	initial := InitialNode(s.cfg.NodeName, s.host, s.cfg.Labels, s.cfg.PodCIDR)
	if len(s.cfg.Annotations) > 0 {
		initial.Annotations = maps.Clone(s.cfg.Annotations)
	}
	initial.Spec.Taints = append([]corev1.Taint(nil), s.cfg.Taints...)
	o := s.observe()
	SetStatus(initial, o, s.cfg.NodeName)
	created, err := nodes.Create(ctx, initial, metav1.CreateOptions{})
	if err == nil {
		// The created node carries a full status: that is a report, so an
		// unchanged status is not written again before the report period.
		s.lastReport = o.Now.Time
		s.log.Info("node registered")
		s.observeNode(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", s.cfg.NodeName, err)
	}
	existing, err := nodes.Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get existing node %s: %w", s.cfg.NodeName, err)
	}
	if ReconcileExisting(existing, initial) {
		if existing, err = nodes.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reconcile labels of existing node %s: %w", s.cfg.NodeName, err)
		}
	}
	s.log.Info("node was registered already; reusing it")
	s.observeNode(existing)
	return nil
}

// watchNode follows the Node object for its pod CIDR (and UID) until ctx
// ends; the status sync reads the node too, so a broken watch only delays.
func (s *Syncer) watchNode(ctx context.Context) {
	nodes := s.cfg.Client.CoreV1().Nodes()
	sel := fields.OneTermEqualSelector("metadata.name", s.cfg.NodeName).String()
	for ctx.Err() == nil {
		if s.cfg.PodCIDR != "" {
			return
		}
		w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			s.log.Debug("watch node", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.drain(ctx, w)
	}
}

func (s *Syncer) drain(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if node, isNode := ev.Object.(*corev1.Node); isNode && ev.Type != watch.Deleted {
				s.observeNode(node)
			}
		}
	}
}
