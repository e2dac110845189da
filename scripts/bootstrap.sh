#!/usr/bin/env bash
# Installs what Strait needs to build, test, demo and bench, from Debian's
# packages, and any packages named as arguments (scripts/fuzz.sh: clang).
# Idempotent: does nothing when everything is already there.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config
  libdpdk-dev dpdk dpdk-dev libnuma-dev libpcap-dev
  libboost-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev
  libspdlog-dev libfmt-dev libpugixml-dev libsqlite3-dev libvirt-dev libmicrohttpd-dev libcap-dev
  libcurl4-openssl-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-scapy python3-pytest tshark iproute2 procps
  # tests/e2e/test_libvirt_qemu.py: libvirtd + QEMU (TCG) guests, whose
  # image scripts/vm_image.sh builds from a busybox and Debian's kernel
  qemu-system-x86 libvirt-daemon-system libvirt-clients busybox-static cpio
)
PKGS+=("$@")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "bootstrap: run as root to install: ${missing[*]}" >&2; exit 1; }
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
