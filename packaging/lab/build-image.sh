#!/usr/bin/env bash
# Builds the VM lab's Debian 12 guest image once and caches it outside the
# clone, in $VM_LAB_CACHE/<hash of the build inputs>/:
#   base.qcow2            the root file system (ext4, no partition table)
#   vmlinuz, initrd.img   the guest's own kernel and initrd (direct boot)
#   id_ed25519[.pub]      the key ssh.sh logs in with (authorized for root)
# The build inputs are this script, the guest files in guest/ and the apt
# mirror; change any of them and the next run builds a new image. Prints
# the image's directory on stdout. Usage: build-image.sh [--force]
set -euo pipefail
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
# shellcheck source=SCRIPTDIR/../../hosttools/require.sh
. "$REPO_DIR/hosttools/require.sh"
need_root

# What the guests run: systemd, containerd and runc with the CNI plugins
# (the nodelet .deb's dependencies, so it installs offline), nftables and
# iptables (the nodelet's masquerade rule), openssh-server (ssh.sh),
# busybox-static (debugging), and the Debian kernel.
PACKAGES=(systemd systemd-sysv dbus udev kmod iproute2 procps linux-image-amd64
	containerd runc containernetworking-plugins iptables nftables openssh-server
	busybox-static ca-certificates curl)
# Started by nothing in the lab; they only slow the boot down.
MASK=(apt-daily.timer apt-daily-upgrade.timer apt-daily.service apt-daily-upgrade.service
	dpkg-db-backup.timer dpkg-db-backup.service e2scrub_all.timer e2scrub_all.service e2scrub_reap.service
	fstrim.timer fstrim.service man-db.timer man-db.service getty@tty1.service
	systemd-timesyncd.service systemd-networkd-wait-online.service ModemManager.service
	modprobe@drm.service modprobe@fuse.service modprobe@efi_pstore.service modprobe@dm_mod.service)
IMAGE_SIZE=8G # sparse; the overlays hold what the guests write
SUITE=bookworm

force=false
[ "${1:-}" = --force ] && force=true

# The apt mirror this machine uses (deb822 sources first, then the
# one-line format), for the suite itself, its updates and security.
sources_file() {
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		echo /etc/apt/sources.list.d/debian.sources
	fi
}
mirror() {
	local f
	f=$(sources_file)
	if [ -n "$f" ]; then
		awk -v suite="$SUITE" '
			/^[[:space:]]*$/ { if (uris != "" && ok) { print uris; exit } uris = ""; ok = 0; next }
			/^URIs:/ { uris = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
			END { if (uris != "" && ok) print uris }' "$f" | head -n1
	else
		awk -v suite="$SUITE" '$1 == "deb" && $0 !~ /\[/ && $3 == suite { print $2; exit }' /etc/apt/sources.list 2>/dev/null
	fi
}
MIRROR=${VM_LAB_MIRROR:-$(mirror)}
[ -n "$MIRROR" ] || die "no apt mirror for $SUITE in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list (set VM_LAB_MIRROR)"

# The apt sources the image is built from: this machine's own file when
# there is one (so updates and security come from the same mirrors).
guest_sources() {
	local f
	f=$(sources_file)
	if [ -n "$f" ]; then
		cat "$f"
	else
		printf 'deb %s %s main\n' "$MIRROR" "$SUITE"
	fi
}

hash=$({
	cat "$0" "$LAB_DIR"/guest/*
	echo "$MIRROR"
	guest_sources
} | sha256sum | cut -c1-16)
IMAGE_DIR=$VM_LAB_CACHE/$hash

if ! $force && [ -f "$IMAGE_DIR/done" ]; then
	touch "$IMAGE_DIR/used"
	echo "$IMAGE_DIR"
	exit 0
fi

require_tools debootstrap qemu-img mkfs.ext4 ssh-keygen chroot mount umount

mkdir -p "$VM_LAB_CACHE"
exec 9>"$VM_LAB_CACHE/.lock"
flock 9 # one build at a time; a second caller finds the first's image
if ! $force && [ -f "$IMAGE_DIR/done" ]; then
	touch "$IMAGE_DIR/used"
	echo "$IMAGE_DIR"
	exit 0
fi

start=$(now)
work=$(mktemp -d "$VM_LAB_CACHE/.build-$hash-XXXXXX")
root=$work/root
mounted=()
cleanup() {
	local m
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		m=${mounted[i]}
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

log "building the guest image $hash (debootstrap from $MIRROR; a few minutes, once)"
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
	{
		tail -n 30 "$work/debootstrap.log" >&2
		die "debootstrap failed"
	}

mount -t proc proc "$root/proc" && mounted+=("$root/proc")
mount -t sysfs sysfs "$root/sys" && mounted+=("$root/sys")
mount --bind /dev "$root/dev" && mounted+=("$root/dev")
mount -t tmpfs tmpfs "$root/run" && mounted+=("$root/run")

# No package may start a service inside the chroot.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
rm -f "$root/etc/apt/sources.list"
guest_sources >"$root/etc/apt/sources.list.d/debian.sources"
# Small: no recommends, docs, man pages or translations.
cat >"$root/etc/apt/apt.conf.d/90nodelet-lab" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/90nodelet-lab" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
# A small initrd (TCG decompresses and runs it slowly): only the modules
# listed (after the install: the list is a conffile of initramfs-tools).
mkdir -p "$root/etc/initramfs-tools/conf.d"
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/nodelet-lab.conf"

export DEBIAN_FRONTEND=noninteractive LC_ALL=C
chroot "$root" apt-get update -qq >"$work/apt.log" 2>&1 &&
	chroot "$root" apt-get -y -qq -o Dpkg::Use-Pty=0 dist-upgrade >>"$work/apt.log" 2>&1 &&
	chroot "$root" apt-get -y -qq -o Dpkg::Use-Pty=0 install "${PACKAGES[@]}" >>"$work/apt.log" 2>&1 ||
	{
		tail -n 40 "$work/apt.log" >&2
		die "installing the guest's packages failed"
	}
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root/usr/sbin/policy-rc.d"

# The guest files and the lab's settings.
install -m 0755 "$LAB_DIR/guest/nodelet-lab-guest" "$root/usr/local/sbin/nodelet-lab-guest"
install -m 0644 "$LAB_DIR/guest/nodelet-lab-guest.service" "$root/etc/systemd/system/nodelet-lab-guest.service"
echo nodelet-lab >"$root/etc/hostname"
cat >"$root/etc/hosts" <<EOF
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
$(for vm in "${VMS[@]}"; do printf '%s\t%s\n' "$(vm_ip "$vm")" "$vm"; done)
EOF
# Nothing resolves names past the lab: the bridge answers no DNS, and no
# query may leave the lab's namespace anyway.
echo "nameserver $VM_LAB_GW" >"$root/etc/resolv.conf"
echo '/dev/vda / ext4 rw,relatime,errors=remount-ro 0 1' >"$root/etc/fstab"

# ssh: root with the lab's key only; one host key (ed25519).
ssh-keygen -q -t ed25519 -N '' -C nodelet-vm-lab -f "$work/id_ed25519"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
rm -f "$root"/etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -C nodelet-vm-lab -f "$root/etc/ssh/ssh_host_ed25519_key"
cat >"$root/etc/ssh/sshd_config.d/nodelet-lab.conf" <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
MaxSessions 50
MaxStartups 50:30:100
EOF

# journald: keep the journal in memory and small (the overlay is per run).
mkdir -p "$root/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=64M\n' >"$root/etc/systemd/journald.conf.d/nodelet-lab.conf"

chroot "$root" systemctl enable nodelet-lab-guest.service containerd.service ssh.service >/dev/null 2>&1
for unit in "${MASK[@]}"; do
	ln -sf /dev/null "$root/etc/systemd/system/$unit"
done

# Kernel modules nothing in a virtual machine loads (≈half of their size).
for kdir in "$root"/lib/modules/*/; do
	for d in drivers/gpu drivers/media drivers/net/wireless drivers/infiniband drivers/staging drivers/bluetooth \
		drivers/isdn drivers/net/ethernet drivers/net/can drivers/usb drivers/hid drivers/input/touchscreen \
		drivers/iio drivers/mmc drivers/scsi/lpfc drivers/scsi/qla2xxx drivers/scsi/mpt3sas sound net/bluetooth \
		net/wireless net/mac80211 drivers/comedi; do
		rm -rf "${kdir:?}kernel/$d"
	done
	chroot "$root" depmod "$(basename "$kdir")"
done
# What mounts the ext4 root from a virtio disk; the initrd also loads the
# network and 9p drivers, so that eth0 and the share are there at once.
printf '%s\n' virtio_pci virtio_blk ext4 virtio_net 9pnet_virtio 9p >>"$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all >"$work/initramfs.log" 2>&1 ||
	{
		cat "$work/initramfs.log" >&2
		die "update-initramfs failed"
	}

kernels=("$root"/boot/vmlinuz-*)
[ ${#kernels[@]} = 1 ] && [ -f "${kernels[0]}" ] || die "expected one kernel in the image, found: ${kernels[*]}"
kver=${kernels[0]##*/vmlinuz-}
cp "${kernels[0]}" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' >"$work/packages.txt"

for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
	umount "${mounted[i]}"
done
mounted=()

truncate -s "$IMAGE_SIZE" "$work/root.raw"
mkfs.ext4 -q -L nodelet-lab -E root_owner=0:0 -d "$root" "$work/root.raw"
qemu-img convert -O qcow2 "$work/root.raw" "$work/base.qcow2"
rm -f "$work/root.raw"
rm -rf "$root"

rm -rf "$IMAGE_DIR"
mkdir -p "$IMAGE_DIR"
mv "$work/base.qcow2" "$work/vmlinuz" "$work/initrd.img" "$work/id_ed25519" "$work/id_ed25519.pub" \
	"$work/packages.txt" "$IMAGE_DIR/"
chmod 0444 "$IMAGE_DIR/base.qcow2" # the overlays' backing file: never written
echo "$MIRROR" >"$IMAGE_DIR/mirror"
touch "$IMAGE_DIR/done" "$IMAGE_DIR/used"
# Images of other build inputs that nothing used for a week go.
for d in "$VM_LAB_CACHE"/*/; do
	d=${d%/}
	[ "$d" != "$IMAGE_DIR" ] && [ -f "$d/done" ] || continue
	if [ -z "$(find "$d/used" -mtime -7 2>/dev/null)" ]; then
		log "removing the unused image $d"
		rm -rf "$d"
	fi
done
log "image $hash built in $(elapsed "$start") s: $(du -sh "$IMAGE_DIR/base.qcow2" | cut -f1) in $IMAGE_DIR"
echo "$IMAGE_DIR"
