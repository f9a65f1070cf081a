package nodestatus

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// LeaseNamespace holds the nodes' heartbeat leases.
const LeaseNamespace = corev1.NamespaceNodeLease

// renewLease renews the node's lease: an update of the last known lease,
// and after a failure a fresh get (or create) and update, as upstream's
// lease controller. Failures are logged; the next tick tries again.
func (s *Syncer) renewLease(ctx context.Context) {
	if s.lease != nil {
		got, err := s.updateLease(ctx, s.lease)
		if err == nil {
			s.lease = got
			return
		}
		s.lease = nil
		s.log.Debug("renew lease from cache", "err", err)
	}
	got, err := s.ensureLease(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("renew node lease", "err", err)
		}
		return
	}
	s.lease = got
}

func (s *Syncer) ensureLease(ctx context.Context) (*coordinationv1.Lease, error) {
	leases := s.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	cur, err := leases.Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.cfg.NodeName, Namespace: LeaseNamespace}}
		s.fillLease(l)
		created, err := leases.Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create lease %s/%s: %w", LeaseNamespace, s.cfg.NodeName, err)
		}
		return created, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s/%s: %w", LeaseNamespace, s.cfg.NodeName, err)
	}
	return s.updateLease(ctx, cur)
}

func (s *Syncer) updateLease(ctx context.Context, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l := cur.DeepCopy()
	s.fillLease(l)
	got, err := s.cfg.Client.CoordinationV1().Leases(LeaseNamespace).Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update lease %s/%s: %w", LeaseNamespace, s.cfg.NodeName, err)
	}
	return got, nil
}

// fillLease sets holder, duration, renew time and, once the node's UID is
// known, the owner reference to the Node (so the lease goes with it).
func (s *Syncer) fillLease(l *coordinationv1.Lease) {
	l.Spec.HolderIdentity = ptr.To(s.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(s.cfg.LeaseDuration.Seconds()))
	l.Spec.RenewTime = &metav1.MicroTime{Time: s.clock.Now()}
	if uid := s.uid(); uid != "" && len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node",
			Name: s.cfg.NodeName, UID: uid,
		}}
	}
}
