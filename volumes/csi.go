package volumes

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// CSIDrivers gives clients of the node service of the CSI drivers
// registered on this node (package csi's Registry). An unregistered
// driver is an error.
type CSIDrivers interface {
	NodeClient(driver string) (csipb.NodeClient, error)
}

// CSIObjects serves the storage objects CSI volumes read: the CSIDriver of
// a driver and the VolumeAttachment of a volume on this node. A missing
// one is an error for which apierrors.IsNotFound holds.
type CSIObjects interface {
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
}

const (
	// csiPluginDir is upstream's escaped plugin name: a pod's CSI volumes
	// live in RootDir/pods/<uid>/volumes/kubernetes.io~csi/<volume>, the
	// driver's target path in its mount/ and the volume's record in
	// vol_data.json beside it.
	csiPluginDir = "kubernetes.io~csi"
	csiVolData   = "vol_data.json"
	csiMountDir  = "mount"
	// csiGlobalMount is the staging target path's last element, under
	// RootDir/plugins/kubernetes.io/csi/<driver>/<sha256(volumeHandle)>.
	csiGlobalMount = "globalmount"

	csiModePersistent = string(storagev1.VolumeLifecyclePersistent)
	csiModeEphemeral  = string(storagev1.VolumeLifecycleEphemeral)

	// The volume context keys of podInfoOnMount, as upstream.
	csiPodName        = "csi.storage.k8s.io/pod.name"
	csiPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	csiPodUID         = "csi.storage.k8s.io/pod.uid"
	csiServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	csiEphemeral      = "csi.storage.k8s.io/ephemeral"
)

// csiVolumeData is vol_data.json, with upstream's keys: enough to
// unpublish (and unstage) from the directory tree alone.
type csiVolumeData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

// csiPlugin provides CSI volumes: inline csi volumes (CSI ephemeral, if
// the CSIDriver allows Ephemeral) and, through claimPlugin, persistent
// volumes with spec.csi. A persistent volume is staged once per node at
// the staging path (when the driver has STAGE_UNSTAGE_VOLUME) and
// published into each pod's mount/; teardown unpublishes, and unstages
// when no other pod's vol_data.json names the volume any more.
type csiPlugin struct {
	root     string
	nodeName string
	drivers  CSIDrivers
	objects  CSIObjects
	secrets  Sources
	log      *slog.Logger
	// attachTimeout bounds the wait for a VolumeAttachment, polled every
	// attachPoll.
	attachTimeout, attachPoll time.Duration
	// stages serializes stage and unstage decisions per staging path.
	stages keyedLocks[string]
}

func (p *csiPlugin) handles(vol *corev1.Volume) bool { return vol.CSI != nil }
func (p *csiPlugin) dirName() string                 { return csiPluginDir }
func (p *csiPlugin) updatable() bool                 { return false }

// csiVolume is what set-up needs of a CSI volume, inline or persistent.
type csiVolume struct {
	driver, handle string
	mode           string
	specVolID      string
	readOnly       bool
	fsType         string
	mountFlags     []string
	accessModes    []corev1.PersistentVolumeAccessMode
	attributes     map[string]string
	stageSecret    *corev1.SecretReference
	publishSecret  *corev1.SecretReference
}

// setup sets up an inline csi volume.
func (p *csiPlugin) setup(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) (Mount, error) {
	src := vol.CSI
	v := csiVolume{driver: src.Driver, handle: csiEphemeralHandle(pod.UID, vol.Name), mode: csiModeEphemeral,
		specVolID: vol.Name, readOnly: isTrue(src.ReadOnly), attributes: src.VolumeAttributes,
		accessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}
	if src.FSType != nil {
		v.fsType = *src.FSType
	}
	if src.NodePublishSecretRef != nil {
		v.publishSecret = &corev1.SecretReference{Namespace: pod.Namespace, Name: src.NodePublishSecretRef.Name}
	}
	return p.setupVolume(ctx, pod, v, dir)
}

// setupPV sets up a persistent volume with spec.csi for a claim of pod;
// podReadOnly is the pod's readOnly for the claim.
func (p *csiPlugin) setupPV(ctx context.Context, pod *corev1.Pod, pv *corev1.PersistentVolume, podReadOnly bool, dir string) (Mount, error) {
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return Mount{}, &UnsupportedError{Type: "csi volumeMode Block"}
	}
	src := pv.Spec.CSI
	return p.setupVolume(ctx, pod, csiVolume{driver: src.Driver, handle: src.VolumeHandle, mode: csiModePersistent,
		specVolID: pv.Name, readOnly: podReadOnly || src.ReadOnly, fsType: src.FSType, mountFlags: pv.Spec.MountOptions,
		accessModes: pv.Spec.AccessModes, attributes: src.VolumeAttributes,
		stageSecret: src.NodeStageSecretRef, publishSecret: src.NodePublishSecretRef}, dir)
}

func (p *csiPlugin) setupVolume(ctx context.Context, pod *corev1.Pod, v csiVolume, dir string) (Mount, error) {
	target := filepath.Join(dir, csiMountDir)
	mnt := Mount{HostPath: target, ReadOnly: v.readOnly, measure: measureCSI}
	if err := checkName(v.driver); err != nil || v.handle == "" {
		return Mount{}, fmt.Errorf("csi: bad driver %q or volume handle %q", v.driver, v.handle)
	}
	// Published already (also by a nodelet before a restart): as upstream,
	// a mounted target is not published again.
	if mounted, err := isMountPoint(target); err != nil || mounted {
		return mnt, err
	}
	if p.drivers == nil {
		return Mount{}, errors.New("csi: no CSI driver registry configured")
	}
	client, err := p.drivers.NodeClient(v.driver)
	if err != nil {
		return Mount{}, err
	}
	spec, err := p.driverSpec(ctx, v.driver)
	if err != nil {
		return Mount{}, err
	}
	if err := checkLifecycleMode(v.driver, spec, v.mode); err != nil {
		return Mount{}, err
	}
	data := csiVolumeData{SpecVolID: v.specVolID, VolumeHandle: v.handle, DriverName: v.driver, NodeName: p.nodeName,
		VolumeLifecycleMode: v.mode}
	var publishContext map[string]string
	if v.mode == csiModePersistent && isTrueOr(spec.AttachRequired, true) {
		data.AttachmentID = AttachmentName(v.handle, v.driver, p.nodeName)
		if publishContext, err = p.waitAttached(ctx, data.AttachmentID); err != nil {
			return Mount{}, err
		}
	}
	caps, err := nodeCapabilities(ctx, client)
	if err != nil {
		return Mount{}, fmt.Errorf("NodeGetCapabilities of CSI driver %s: %w", v.driver, err)
	}
	fsGroup, _ := podFSGroup(pod)
	var mountGroup string
	if fsGroup != nil && caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] {
		mountGroup = strconv.FormatInt(*fsGroup, 10) // the driver applies it
	}
	capability := csiCapability(v, caps, mountGroup)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return Mount{}, fmt.Errorf("create %s: %w", dir, err)
	}
	staging := ""
	if v.mode == csiModePersistent && caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = filepath.Join(CSIStagingDir(p.root, v.driver, v.handle), csiGlobalMount)
	}
	if err := p.stage(ctx, client, v, data, dir, staging, publishContext, capability); err != nil {
		return Mount{}, err
	}
	secrets, err := p.secretData(ctx, v.publishSecret)
	if err != nil {
		return Mount{}, err
	}
	if _, err := client.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: v.handle, PublishContext: publishContext,
		StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, Readonly: v.readOnly,
		Secrets: secrets, VolumeContext: volumeContext(v, spec, pod)}); err != nil {
		return Mount{}, fmt.Errorf("NodePublishVolume of volume %s (CSI driver %s) at %s: %w", v.handle, v.driver, target, err)
	}
	// The Manager applies the pod's fsGroup unless the driver does.
	mnt.fsGroupManaged = mountGroup == "" && csiFSGroupApplies(v, spec)
	return mnt, nil
}

// stage records the pod's use of the volume (vol_data.json in dir, before
// anything is staged, so a concurrent teardown of another pod sees it)
// and stages the volume at staging unless that is "" (no staging).
func (p *csiPlugin) stage(ctx context.Context, client csipb.NodeClient, v csiVolume, data csiVolumeData, dir, staging string,
	publishContext map[string]string, capability *csipb.VolumeCapability) error {
	if staging == "" {
		return writeJSON(filepath.Join(dir, csiVolData), data)
	}
	defer p.stages.lock(staging)()
	if err := writeJSON(filepath.Join(dir, csiVolData), data); err != nil {
		return err
	}
	if mounted, err := isMountPoint(staging); err != nil || mounted {
		return err
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("create staging path %s: %w", staging, err)
	}
	if err := writeJSON(filepath.Join(filepath.Dir(staging), csiVolData),
		csiVolumeData{VolumeHandle: v.handle, DriverName: v.driver}); err != nil {
		return err
	}
	secrets, err := p.secretData(ctx, v.stageSecret)
	if err != nil {
		return err
	}
	if _, err := client.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: v.handle, PublishContext: publishContext,
		StagingTargetPath: staging, VolumeCapability: capability, Secrets: secrets, VolumeContext: v.attributes}); err != nil {
		return fmt.Errorf("NodeStageVolume of volume %s (CSI driver %s) at %s: %w", v.handle, v.driver, staging, err)
	}
	p.log.Debug("CSI volume staged", "driver", v.driver, "volume", v.handle, "path", staging)
	return nil
}

// teardown unpublishes the volume at dir as its vol_data.json records
// it, and unstages it when no other pod uses it. Without vol_data.json
// nothing reached the driver.
func (p *csiPlugin) teardown(ctx context.Context, dir string) error {
	var data csiVolumeData
	if err := readJSON(filepath.Join(dir, csiVolData), &data); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if p.drivers == nil {
		return errors.New("csi: no CSI driver registry configured")
	}
	client, err := p.drivers.NodeClient(data.DriverName)
	if err != nil {
		return err
	}
	target := filepath.Join(dir, csiMountDir)
	if _, err := os.Lstat(target); err == nil {
		if _, err := client.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: data.VolumeHandle, TargetPath: target}); err != nil {
			return fmt.Errorf("NodeUnpublishVolume of volume %s (CSI driver %s) at %s: %w", data.VolumeHandle, data.DriverName, target, err)
		}
		if err := removeUnmounted(target); err != nil {
			return err
		}
	}
	if data.VolumeLifecycleMode == csiModeEphemeral {
		return nil
	}
	return p.unstage(ctx, client, data, dir)
}

// unstage unstages the volume of data unless another pod's vol_data.json
// (not the one in self) names it, and removes the staging directory.
func (p *csiPlugin) unstage(ctx context.Context, client csipb.NodeClient, data csiVolumeData, self string) error {
	stagingDir := CSIStagingDir(p.root, data.DriverName, data.VolumeHandle)
	staging := filepath.Join(stagingDir, csiGlobalMount)
	defer p.stages.lock(staging)()
	users, err := p.volumeUsers()
	if err != nil {
		return err
	}
	for _, u := range users {
		if u.dir != self && u.data.VolumeLifecycleMode != csiModeEphemeral &&
			u.data.DriverName == data.DriverName && u.data.VolumeHandle == data.VolumeHandle {
			return nil // still published for another pod
		}
	}
	if _, err := os.Lstat(stagingDir); errors.Is(err, os.ErrNotExist) {
		return nil // never staged, or unstaged already
	}
	caps, err := nodeCapabilities(ctx, client)
	if err != nil {
		return fmt.Errorf("NodeGetCapabilities of CSI driver %s: %w", data.DriverName, err)
	}
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		if _, err := client.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: data.VolumeHandle, StagingTargetPath: staging}); err != nil {
			return fmt.Errorf("NodeUnstageVolume of volume %s (CSI driver %s) at %s: %w", data.VolumeHandle, data.DriverName, staging, err)
		}
	}
	if err := removeUnmounted(staging); err != nil {
		return err
	}
	if err := os.RemoveAll(stagingDir); err != nil {
		return fmt.Errorf("remove staging dir %s: %w", stagingDir, err)
	}
	p.log.Debug("CSI volume unstaged", "driver", data.DriverName, "volume", data.VolumeHandle)
	return nil
}

// removeUnmounted removes the directory dir unless something is still
// mounted there (the driver did not unmount it); missing is fine.
func removeUnmounted(dir string) error {
	mounted, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s is still mounted after the CSI driver's unmount", dir)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// csiUser is one pod volume's vol_data.json.
type csiUser struct {
	dir  string
	data csiVolumeData
}

// volumeUsers reads the vol_data.json of every pod's CSI volume.
func (p *csiPlugin) volumeUsers() ([]csiUser, error) {
	files, err := filepath.Glob(filepath.Join(p.root, "pods", "*", "volumes", csiPluginDir, "*", csiVolData))
	if err != nil {
		return nil, fmt.Errorf("list CSI volumes: %w", err)
	}
	users := make([]csiUser, 0, len(files))
	for _, f := range files {
		var d csiVolumeData
		if err := readJSON(f, &d); errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile
		} else if err != nil {
			return nil, err
		}
		users = append(users, csiUser{dir: filepath.Dir(f), data: d})
	}
	return users, nil
}

// driverSpec is the CSIDriver's spec with upstream's defaults, which also
// hold when the driver has no CSIDriver object.
func (p *csiPlugin) driverSpec(ctx context.Context, driver string) (storagev1.CSIDriverSpec, error) {
	var spec storagev1.CSIDriverSpec
	if p.objects != nil {
		d, err := p.objects.CSIDriver(ctx, driver)
		switch {
		case err == nil:
			spec = d.Spec
		case !apierrors.IsNotFound(err):
			return spec, fmt.Errorf("get CSIDriver %s: %w", driver, err)
		}
	}
	if len(spec.VolumeLifecycleModes) == 0 {
		spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if spec.FSGroupPolicy == nil {
		def := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
		spec.FSGroupPolicy = &def
	}
	return spec, nil
}

// checkLifecycleMode refuses a volume of a mode the CSIDriver does not
// list, with upstream's message.
func checkLifecycleMode(driver string, spec storagev1.CSIDriverSpec, mode string) error {
	for _, m := range spec.VolumeLifecycleModes {
		if string(m) == mode {
			return nil
		}
	}
	return fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, driver, spec.VolumeLifecycleModes)
}

// waitAttached waits for the VolumeAttachment name to be attached and
// returns its attachment metadata (the publish context).
func (p *csiPlugin) waitAttached(ctx context.Context, name string) (map[string]string, error) {
	if p.objects == nil {
		return nil, errors.New("csi: no source of VolumeAttachments configured")
	}
	ctx, cancel := context.WithTimeout(ctx, p.attachTimeout)
	defer cancel()
	var last error
	for {
		va, err := p.objects.VolumeAttachment(ctx, name)
		switch {
		case err != nil:
			last = fmt.Errorf("get VolumeAttachment %s: %w", name, err)
		case va.DeletionTimestamp != nil:
			return nil, fmt.Errorf("volume attachment %s is being deleted", name)
		case va.Status.Attached:
			return va.Status.AttachmentMetadata, nil
		case va.Status.AttachError != nil:
			return nil, fmt.Errorf("attachment %s failed: %s", name, va.Status.AttachError.Message)
		default:
			last = fmt.Errorf("volume attachment %s is not attached yet", name)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("timed out waiting for external-attacher of %s: %w", name, last)
		case <-time.After(p.attachPoll):
		}
	}
}

// secretData reads a secret reference's data (nil for none).
func (p *csiPlugin) secretData(ctx context.Context, ref *corev1.SecretReference) (map[string]string, error) {
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	if p.secrets == nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ref.Namespace, ref.Name, errNoSources)
	}
	s, err := p.secrets.Secret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("get secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	maps.Copy(out, s.StringData)
	return out, nil
}

// nodeCapabilities asks the driver's node capabilities.
func nodeCapabilities(ctx context.Context, client csipb.NodeClient) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	resp, err := client.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	caps := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range resp.GetCapabilities() {
		if rpc := c.GetRpc(); rpc != nil {
			caps[rpc.GetType()] = true
		}
	}
	return caps, nil
}

// csiCapability is the volume capability of a mounted volume: the file
// system type, the mount flags and the access mode, as upstream maps
// them.
func csiCapability(v csiVolume, caps map[csipb.NodeServiceCapability_RPC_Type]bool, mountGroup string) *csipb.VolumeCapability {
	mode := corev1.ReadWriteOnce
	if len(v.accessModes) > 0 {
		mode = v.accessModes[0]
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: v.fsType, MountFlags: v.mountFlags, VolumeMountGroup: mountGroup}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csiAccessMode(mode, caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER])},
	}
}

// csiAccessMode is upstream's asCSIAccessModeV1.
func csiAccessMode(m corev1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) csipb.VolumeCapability_AccessMode_Mode {
	switch m {
	case corev1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case corev1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case corev1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case corev1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// volumeContext is the volume's attributes, with the pod's identity when
// the CSIDriver asks for it (podInfoOnMount), as upstream.
func volumeContext(v csiVolume, spec storagev1.CSIDriverSpec, pod *corev1.Pod) map[string]string {
	if !isTrue(spec.PodInfoOnMount) {
		return v.attributes
	}
	ctx := maps.Clone(v.attributes)
	if ctx == nil {
		ctx = map[string]string{}
	}
	ctx[csiPodName] = pod.Name
	ctx[csiPodNamespace] = pod.Namespace
	ctx[csiPodUID] = string(pod.UID)
	ctx[csiServiceAccount] = pod.Spec.ServiceAccountName
	ctx[csiEphemeral] = strconv.FormatBool(v.mode == csiModeEphemeral)
	return ctx
}

// csiFSGroupApplies is upstream's supportsFSGroup: whether the nodelet
// changes the volume's ownership to the pod's fsGroup after publishing.
func csiFSGroupApplies(v csiVolume, spec storagev1.CSIDriverSpec) bool {
	if v.readOnly || spec.FSGroupPolicy == nil || *spec.FSGroupPolicy == storagev1.NoneFSGroupPolicy {
		return false
	}
	if *spec.FSGroupPolicy == storagev1.FileFSGroupPolicy {
		return true
	}
	if v.fsType == "" || v.mode == csiModeEphemeral {
		return false
	}
	for _, m := range v.accessModes {
		if m == corev1.ReadWriteOnce {
			return true
		}
	}
	return false
}

// CSIStagingDir is the directory of a persistent CSI volume's staging
// path (its globalmount) and vol_data.json, as upstream:
// rootDir/plugins/kubernetes.io/csi/<driver>/<sha256 of volumeHandle>.
func CSIStagingDir(rootDir, driver, volumeHandle string) string {
	return filepath.Join(rootDir, "plugins", "kubernetes.io", "csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(volumeHandle))))
}

// AttachmentName is the name of the VolumeAttachment of a volume on a
// node, as upstream's attach/detach controller and external-attacher name
// it: csi-<sha256 of volumeHandle, driver and node name>.
func AttachmentName(volumeHandle, driver, nodeName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(volumeHandle+driver+nodeName)))
}

// csiEphemeralHandle is the volume handle of an inline CSI volume, as
// upstream's makeVolumeHandle: csi-<sha256 of pod UID and volume name>.
func csiEphemeralHandle(uid types.UID, volume string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(uid)+volume)))
}

// CSIUniqueVolumeName is the unique name of a persistent CSI volume in
// node.status.volumesInUse and volumesAttached, as upstream:
// kubernetes.io/csi/<driver>^<volumeHandle>.
func CSIUniqueVolumeName(driver, volumeHandle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + volumeHandle)
}

func isTrueOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}
