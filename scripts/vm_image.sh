#!/usr/bin/env bash
# Builds (once, cached) a tiny guest for the libvirt/QEMU end-to-end test:
#
#   OUT_DIR/vmlinux      the Debian 6.1 kernel, uncompressed (boots ~3 s faster
#                        under TCG than the bzImage; vmlinuz when extraction fails)
#   OUT_DIR/initrd.img   a busybox initramfs (tests/e2e/guest/init) with the
#                        virtio-net modules
#   OUT_DIR/cmdline      the kernel command line it wants (plus strait.ip= etc.)
#   OUT_DIR/stamp        what it was built from; a rebuild happens when it changes
#
# The kernel and its modules come from `apt-get download linux-image-<ver>-amd64`
# and `dpkg-deb -x`: nothing is installed on the host. Needs busybox-static and
# cpio (scripts/bootstrap.sh). Exits non-zero, saying why, when it cannot build.
#
# Usage: scripts/vm_image.sh OUT_DIR
# Environment: STRAIT_GUEST_KERNEL_PKG (default: what linux-image-amd64 depends on).
set -euo pipefail

out=${1:?usage: vm_image.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
guest_dir=$(cd "$here/../tests/e2e/guest" && pwd)
busybox=/bin/busybox

die() { echo "vm_image: $*" >&2; exit 1; }

[ -x "$busybox" ] || die "$busybox is missing (install busybox-static)"
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is not static (install busybox-static)"
command -v cpio >/dev/null || die "cpio is missing"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing"

cached() { [ -s "$out/initrd.img" ] && [ -s "$out/vmlinux" ] && [ -s "$out/cmdline" ]; }
kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ {sub(/-unsigned$/, "", $2); print $2; exit}'
}
pkg=${STRAIT_GUEST_KERNEL_PKG:-$(kernel_pkg)}
if [ -z "$pkg" ]; then
  # No package lists (offline, never updated): a cached image will do.
  cached && { echo "vm_image: using the cached $out ($(cat "$out/stamp" 2>/dev/null))"; exit 0; }
  [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && pkg=$(kernel_pkg)
  [ -n "$pkg" ] || die "cannot tell which linux-image package to use (apt-cache depends linux-image-amd64)"
fi

# What the image is made of: the kernel package, the init script, this script.
stamp="$pkg $(md5sum "$guest_dir/init" "$0" | awk '{print $1}' | tr '\n' ' ')"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && cached; then
  echo "vm_image: $out is up to date ($pkg)"
  exit 0
fi

mkdir -p "$out"
work=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- the kernel package, unpacked --------------------------------------------------
echo "vm_image: fetching $pkg"
deb=""
(cd "$work" && apt-get download -q "$pkg" >/dev/null 2>"$work/apt.err") || {
  # Package lists may be missing (a fresh container): refresh them once, as root.
  [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 &&
    (cd "$work" && apt-get download -q "$pkg" >/dev/null 2>"$work/apt.err")
} || die "apt-get download $pkg failed: $(grep -v '^W:' "$work/apt.err" | tail -3)"
for d in "$work"/"${pkg}"_*.deb; do [ -f "$d" ] && deb=$d; done
[ -n "$deb" ] || die "apt-get download $pkg left no .deb"
dpkg-deb -x "$deb" "$work/pkg"
ver=$(ls "$work/pkg/lib/modules" | head -1)
[ -n "$ver" ] || die "$pkg has no /lib/modules"
vmlinuz="$work/pkg/boot/vmlinuz-$ver"
[ -f "$vmlinuz" ] || die "$pkg has no /boot/vmlinuz-$ver"

# ---- the uncompressed kernel (scripts/extract-vmlinux, in Python) -------------------
if ! /usr/bin/python3 - "$vmlinuz" "$work/vmlinux" <<'EOF'
import lzma, sys, zlib
data = open(sys.argv[1], "rb").read()

def try_xz(ofs):
    d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    return d.decompress(data[ofs:])

def try_gzip(ofs):
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return d.decompress(data[ofs:])

for magic, fn in ((b"\xfd7zXZ\x00", try_xz), (b"\x1f\x8b\x08", try_gzip)):
    ofs = data.find(magic)
    while ofs >= 0:
        try:
            out = fn(ofs)
            if out[:4] == b"\x7fELF":
                open(sys.argv[2], "wb").write(out)
                sys.exit(0)
        except Exception:
            pass
        ofs = data.find(magic, ofs + 1)
sys.exit(1)
EOF
then
  echo "vm_image: could not extract vmlinux from the bzImage; using vmlinuz (slower boot)" >&2
  cp "$vmlinuz" "$work/vmlinux"
fi

# ---- the initramfs --------------------------------------------------------------------
root="$work/initramfs"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,etc,lib/modules}
cp "$busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
install -m 0755 "$guest_dir/init" "$root/init"
# The virtio-net stack (the init finds a working load order by trying);
# evdev + button let the guest see ACPI's power button, which `virsh reboot`
# and `virsh shutdown` press.
mods="virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover
      net_failover virtio_net evdev button"
: > "$root/lib/modules/order"
for m in $mods; do
  f=$(find "$work/pkg/lib/modules/$ver/kernel" -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" | head -1)
  if [ -z "$f" ]; then
    # Built into the kernel: nothing to load.
    grep -q "/$m.ko\$" "$work/pkg/lib/modules/$ver/modules.builtin" 2>/dev/null ||
      echo "vm_image: note: module $m not found in $pkg (assuming built in)" >&2
    continue
  fi
  case "$f" in
    *.xz) xz -dc "$f" > "$root/lib/modules/$m.ko" ;;
    *.zst) zstd -qdc "$f" > "$root/lib/modules/$m.ko" ;;
    *) cp "$f" "$root/lib/modules/$m.ko" ;;
  esac
  echo "$m" >> "$root/lib/modules/order"
done
grep -qx virtio_net "$root/lib/modules/order" || die "virtio_net.ko not found in $pkg"
# Uncompressed: nothing to decompress at boot under TCG.
(cd "$root" && find . -print0 | LC_ALL=C sort -z |
   cpio --null -o -H newc -R 0:0 --quiet) > "$work/initrd.img"

echo "console=ttyS0 loglevel=4 panic=-1 mitigations=off" > "$work/cmdline"

# ---- publish ------------------------------------------------------------------------
chmod 0644 "$work/vmlinux" "$work/initrd.img" "$work/cmdline"
mv -f "$work/vmlinux" "$out/vmlinux"
mv -f "$work/initrd.img" "$out/initrd.img"
mv -f "$work/cmdline" "$out/cmdline"
echo "$ver" > "$out/kernel-version"
echo "$stamp" > "$out/stamp"
echo "vm_image: built $out ($ver, $(du -h "$out/vmlinux" | cut -f1) kernel," \
     "$(du -h "$out/initrd.img" | cut -f1) initramfs)"
