#!/usr/bin/env bash
# An emulated ARM userland of a board: a Debian root file system for ARCH (armhf: the Cortex-A9 of
# PYNQ-Z1/Z2, 32-bit hard float; arm64: the Cortex-A53 of Ultra96 and ZCU104) with python3,
# numpy and pytest from Debian's packages, run under qemu-user. Idempotent and cached: the root
# file system is built once per ARCH, suite and package list (mmdebstrap's extract variant: the
# packages are unpacked, no maintainer script runs, so no binfmt handler is needed) under
# ${PYVTA_CACHE_DIR:-~/.cache/pyvta}/arm-userland/.
#
#   scripts/arm_userland.sh ARCH    # prints the path of ARCH's python on stdout: a host script,
#                                   # ROOTFS/usr/bin/python3-qemu, running the ARM python3 under
#                                   # qemu with -L ROOTFS
#
# That python is an ordinary executable on the host: subprocesses the ARM python starts with
# sys.executable run under qemu too (qemu's -0 sets argv[0], so sys.executable is that script).
set -euo pipefail

arch=${1:-}
case "$arch" in
  armhf) qemu=qemu-arm triplet=arm-linux-gnueabihf ;;
  arm64) qemu=qemu-aarch64 triplet=aarch64-linux-gnu ;;
  *) echo "usage: $0 armhf|arm64 (the ARM userland to build or reuse)" >&2; exit 2 ;;
esac

PACKAGES="python3,python3-numpy,python3-pytest"
LAYOUT=5  # bump when the steps below change what a root file system holds
suite=bookworm
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  suite=$(. /etc/os-release && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-bookworm}" || echo bookworm)
fi

need=()
command -v "$qemu" >/dev/null 2>&1 || need+=(qemu-user)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "arm-userland: installing ${need[*]} (Debian packages)" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >&2
fi

cache=${PYVTA_CACHE_DIR:-$HOME/.cache/pyvta}/arm-userland
tag=$(printf '%s|%s|%s|%s' "$arch" "$suite" "$PACKAGES" "$LAYOUT" | sha256sum | cut -c1-12)
home=$cache/$arch-$suite-$tag
py=$home/rootfs/usr/bin/python3-qemu
if [ ! -f "$home/ready" ]; then
  start=$(date +%s)
  echo "arm-userland: building the $arch root file system ($suite: ${PACKAGES//,/ }) in $home" >&2
  rm -rf "$home" "$home.tmp"
  mkdir -p "$home.tmp"
  mirror=()
  # the host's own Debian sources (its mirror and keys), else mmdebstrap's default
  sources=/etc/apt/sources.list.d/debian.sources
  [ -r "$sources" ] && mirror=("$sources")
  build() {
    rm -rf "$home.tmp/rootfs"
    mmdebstrap --quiet --variant=extract --architectures="$arch" --include="$PACKAGES" \
      "$suite" "$home.tmp/rootfs" "$@" >&2
  }
  # A mirror caught mid-sync fails apt's update for every suite ("File has unexpected size",
  # seen for bookworm-security's armhf index): try again, then with the sources' first stanza
  # alone (the main suites, without the security one), which is enough for a test userland.
  if ! build "${mirror[@]}"; then
    echo "arm-userland: mmdebstrap failed; trying again in 30 s" >&2
    sleep 30
    if ! build "${mirror[@]}"; then
      [ -r "$sources" ] || { echo "arm-userland: mmdebstrap failed twice" >&2; exit 1; }
      echo "arm-userland: mmdebstrap failed again; building from $sources's first stanza alone" >&2
      awk 'BEGIN { RS = ""; ORS = "\n" } NR == 1' "$sources" > "$home.tmp/main.sources"
      build "$home.tmp/main.sources"
    fi
  fi
  root=$home.tmp/rootfs
  # what the skipped maintainer scripts would have done: BLAS/LAPACK's alternatives
  for lib in blas/libblas.so.3 lapack/liblapack.so.3; do
    ln -sf "$lib" "$root/usr/lib/$triplet/$(basename "$lib")"
  done
  # /tmp is the host's (qemu -L falls back to the host's file where the root file system has none)
  rm -rf "$root/tmp"
  pyver=$(basename "$(readlink -f "$root/usr/bin/python3")")
  # The ARM python is started by its path in the root file system, so every path it derives
  # (sys.prefix, sys.path) is a real one on the host: qemu 7.2 maps open() into the root file
  # system but not stat(), so a guest "/usr/lib/..." is found by the one and not the other.
  # -L still serves the dynamic loader and the shared libraries.
  printf '%s\n' "#!/bin/sh" \
    "# python3 of the $arch userland under $qemu (made by scripts/arm_userland.sh)" \
    "PYTHONNOUSERSITE=1 exec $qemu -0 \"\$0\" -L \"$home/rootfs\" \"$home/rootfs/usr/bin/$pyver\" \"\$@\"" \
    >"$root/usr/bin/python3-qemu"
  chmod +x "$root/usr/bin/python3-qemu"
  mv "$home.tmp" "$home"
  # bytecode once (PYTHONDONTWRITEBYTECODE may be set): by the host's python of the same X.Y
  # where there is one (bytecode is the same on every CPU; emulated, this took ~90 s), else the ARM's
  compiler=$py
  command -v "$pyver" >/dev/null 2>&1 && compiler=$pyver
  "$compiler" -m compileall -q -j 0 "$home/rootfs/usr/lib/python3/dist-packages" \
    "$home/rootfs/usr/lib/$pyver" >/dev/null 2>&1 || true
  "$py" -c 'import sys, platform, numpy, pytest; print(f"{platform.machine()} python {sys.version.split()[0]} numpy {numpy.__version__} pytest {pytest.__version__}")' \
    >"$home/versions.txt"
  echo "setup $(($(date +%s) - start)) s, $(du -sh "$home/rootfs" | cut -f1) on disk" >>"$home/versions.txt"
  touch "$home/ready"
fi
echo "arm-userland: $arch: $(paste -sd ',' "$home/versions.txt")" >&2
echo "$py"
