#!/usr/bin/env bash
# Builds DPDK 22.11 from Debian's source package (the version of the
# installed libdpdk-dev) with meson and ninja, tuned for this machine and with
# only the drivers Strait uses plus the common physical NIC drivers, as static
# libraries into build-dpdk/prefix; then builds straitd and straitctl against
# it in build-localdpdk/ (CMake's STRAIT_DPDK_PREFIX) and checks that straitd
# runs on it. README.md here says why each option.
#
#   meson-dpdk/build.sh           (as root; `make meson-dpdk` runs it)
#   JOBS=N meson-dpdk/build.sh    ninja's parallelism (default: nproc)
#
# Idempotent: a prefix already built from the same source version and
# options (build-dpdk/prefix/.strait-stamp) is not rebuilt, and ninja
# rebuilds nothing of Strait that is up to date.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$SRC/build-dpdk
PREFIX=$WORK/prefix
STRAIT_BUILD=$SRC/build-localdpdk
JOBS=${JOBS:-$(nproc)}
SOURCES_FILE=/etc/apt/sources.list.d/strait-dpdk-src.sources
# libsystemd-dev: libpcap's static link line (pkg-config --static) names
# -lsystemd through dbus-1; --as-needed drops it from straitd again.
DEPS=(meson ninja-build python3-pyelftools pkg-config libnuma-dev libpcap-dev
      libbsd-dev libelf-dev zlib1g-dev libibverbs-dev libsystemd-dev dpkg-dev)

# What Strait uses (tests, bench, demo, docs) and what those need; then the
# common physical NICs. mlx5 builds from Debian's rdma-core (libibverbs-dev);
# ibverbs_link=dlopen keeps rdma-core out of straitd's link (its glue
# library is loaded when an mlx5 device is probed).
DRIVERS=(
  bus/pci bus/vdev bus/auxiliary mempool/ring
  net/ring net/vhost net/virtio net/tap net/pcap net/memif net/null net/af_packet
  common/iavf net/i40e net/ixgbe net/ice net/iavf net/e1000 net/bnxt
  common/mlx5 net/mlx5
)
# Optional libraries (22.11's lib/meson.build optional_libs) Strait neither
# links nor needs for a driver above. Kept: vhost, pdump (with bpf, pcapng),
# gso (net/tap), and everything 22.11 cannot disable (acl, hash, rcu, ...).
DISABLED_LIBS=(bitratestats cfgfile flow_classify gpudev gro jobstats kni
               latencystats metrics node pipeline port power table)

join() { local IFS=,; echo "$*"; }
MESON_OPTS=(
  -Dbuildtype=release
  -Ddefault_library=static
  -Dcpu_instruction_set=native
  -Dplatform=native
  -Dtests=false
  -Dexamples=
  -Denable_docs=false
  -Ddisable_apps='*'
  -Denable_drivers="$(join "${DRIVERS[@]}")"
  -Ddisable_libs="$(join "${DISABLED_LIBS[@]}")"
  -Dibverbs_link=dlopen
)

[ "$(id -u)" = 0 ] || { echo "meson-dpdk: run as root (apt-get)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive

T_ALL=$(date +%s)
T=$T_ALL
stage() {  # prints how long the stage that just ended took
  local now; now=$(date +%s)
  printf 'meson-dpdk: %-28s %4d s\n' "$1" $((now - T))
  T=$now
}

# --- deb-src entries: the same URIs and suites as the deb ones --------------
add_deb_src() {
  local deb=/etc/apt/sources.list.d/debian.sources
  [ -f "$deb" ] || { echo "meson-dpdk: $deb not found" >&2; exit 1; }
  local want
  want=$(sed -e 's/^Types: deb$/Types: deb-src/' "$deb" | grep -v '^#')
  if [ "$(cat "$SOURCES_FILE" 2>/dev/null)" != "$want" ]; then
    printf '%s\n' "$want" >"$SOURCES_FILE"
    apt-get update -qq
  elif ! ls /var/lib/apt/lists/*_Sources* >/dev/null 2>&1; then
    apt-get update -qq
  fi
}

install_deps() {
  local missing=()
  for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} = 0 ] && return 0
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

VERSION=$(dpkg-query -W -f='${Version}' libdpdk-dev 2>/dev/null || true)
[ -n "$VERSION" ] || { echo "meson-dpdk: libdpdk-dev is not installed (make deps)" >&2; exit 1; }
UPSTREAM=${VERSION%%-*}
DPDK_SRC=$WORK/src/dpdk-$UPSTREAM
STAMP=$PREFIX/.strait-stamp
STAMP_WANT="dpdk $VERSION; $(printf '%s ' "${MESON_OPTS[@]}")"

build_dpdk() {
  add_deb_src
  install_deps
  stage "apt sources, dependencies"

  if [ ! -f "$DPDK_SRC/meson.build" ]; then
    rm -rf "$WORK/src" && mkdir -p "$WORK/src"
    (cd "$WORK/src" && apt-get source -qq "dpdk=$VERSION" 2>&1 | grep -v '^dpkg-source: info' || true)
    [ -f "$DPDK_SRC/meson.build" ] || { echo "meson-dpdk: apt-get source dpdk=$VERSION failed" >&2; exit 1; }
  fi
  stage "source dpdk $VERSION"

  # A build dir of the same source is reconfigured: ninja then rebuilds
  # only what the changed options touch.
  if [ -f "$WORK/build/build.ninja" ] && grep -qF "$DPDK_SRC" "$WORK/build/build.ninja"; then
    meson configure "$WORK/build" -Dprefix="$PREFIX" "${MESON_OPTS[@]}" >/dev/null
    meson setup --reconfigure "$WORK/build" "$DPDK_SRC" >"$WORK/meson-setup.log"
  else
    rm -rf "$WORK/build"
    meson setup "$WORK/build" "$DPDK_SRC" -Dprefix="$PREFIX" "${MESON_OPTS[@]}" >"$WORK/meson-setup.log"
  fi
  # The summary of what is built and what is not, and why.
  sed -n '/Libraries Enabled/,/Content Skipped/p' "$WORK/meson-setup.log" |
    grep -vE '^(Message:.*|=+|[A-Za-z ]+Enabled|Content Skipped)?\s*$' |
    awk '/^[a-z]+:$/ { h = $0; next } { if (h != "") print h; h = ""; print }'
  stage "meson setup"

  nice -n 19 ninja -C "$WORK/build" -j "$JOBS" >"$WORK/ninja.log"
  stage "ninja (-j $JOBS)"
  rm -rf "$PREFIX"
  meson install -C "$WORK/build" --quiet >/dev/null
  printf '%s\n' "$STAMP_WANT" >"$STAMP"
  stage "meson install"
}

if [ "$(cat "$STAMP" 2>/dev/null)" = "$STAMP_WANT" ]; then
  echo "meson-dpdk: $PREFIX is DPDK $VERSION with these options already"
else
  build_dpdk
fi

# --- Strait against it ------------------------------------------------------
if [ ! -f "$STRAIT_BUILD/build.ninja" ]; then
  cmake -S "$SRC" -B "$STRAIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTRAIT_DPDK_PREFIX="$PREFIX" -DSTRAIT_BUILD_TESTS=OFF >"$WORK/cmake.log"
  grep -E 'DPDK' "$WORK/cmake.log" || true
  stage "strait cmake"
fi
nice -n 19 cmake --build "$STRAIT_BUILD" -j "$JOBS" --target straitd straitctl >"$WORK/strait-build.log"
stage "strait build"

bash "$SRC/meson-dpdk/check.sh" "$STRAIT_BUILD"
stage "check"
printf 'meson-dpdk: %-28s %4d s\n' "total" $(($(date +%s) - T_ALL))
