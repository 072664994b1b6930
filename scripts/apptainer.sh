#!/usr/bin/env bash
# Apptainer for nearmetal's set-up (called by scripts/setup.sh; idempotent).
#
# - An installed `apptainer` (or `singularity`) on PATH is used as it is: nothing to do.
# - Else, when NEARMETAL_APPTAINER_SRC names an Apptainer source release (.tar.gz), it is
#   built once (Debian build dependencies, Go modules from the Go module proxy, `mconfig
#   --without-suid`) and installed into $NEARMETAL_HOME/apptainer/<version>; `current` points
#   at it and nearmetal finds it there. A second set-up only checks.
# - Else one line says Apptainer is unavailable and how to provide it; set-up goes on.
# NEARMETAL_REQUIRE_APPTAINER=1 (CI) turns "unavailable" and a failed build into an error.
set -euo pipefail

require=${NEARMETAL_REQUIRE_APPTAINER:-0}
home=${NEARMETAL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/nearmetal}
unavailable() {
  echo "setup: Apptainer unavailable: $1" >&2
  if [ "$require" = 1 ]; then
    echo "setup: NEARMETAL_REQUIRE_APPTAINER=1: failing" >&2
    exit 1
  fi
  exit 0
}

for exe in apptainer singularity; do
  if command -v "$exe" >/dev/null 2>&1; then
    echo "setup: Apptainer: using $(command -v "$exe") ($("$exe" --version 2>/dev/null | head -n1))"
    exit 0
  fi
done

src=${NEARMETAL_APPTAINER_SRC:-}
current="$home/apptainer/current"
if [ -z "$src" ] && [ -x "$current/bin/apptainer" ] && [ -f "$current/.nearmetal-built" ]; then
  echo "setup: Apptainer: $current/bin/apptainer (built before)"
  exit 0
fi
if [ -z "$src" ]; then
  unavailable "no apptainer or singularity on PATH; set NEARMETAL_APPTAINER_SRC to an Apptainer source release (.tar.gz) to build one, or install it"
fi
[ -f "$src" ] || unavailable "NEARMETAL_APPTAINER_SRC=$src is not a file"

# The version from the tarball's top directory (apptainer-1.4.5/).
top=$(tar -tzf "$src" 2>/dev/null | head -n1 | cut -d/ -f1) || true
case "$top" in
  apptainer-[0-9]*) version=${top#apptainer-} ;;
  *) unavailable "$src is not an Apptainer source release (no apptainer-VERSION/ directory inside)" ;;
esac
prefix="$home/apptainer/$version"
if [ -x "$prefix/bin/apptainer" ] && [ -f "$prefix/.nearmetal-built" ]; then
  ln -sfn "$version" "$home/apptainer/current"
  echo "setup: Apptainer $version: $prefix/bin/apptainer (built before)"
  exit 0
fi

BUILD_DEPS=(build-essential pkg-config libseccomp-dev libsubid-dev fuse2fs fuse-overlayfs cryptsetup
            libfuse3-dev zlib1g-dev liblzo2-dev liblz4-dev liblzma-dev libzstd-dev squashfs-tools
            squashfuse uidmap)
missing=()
for p in "${BUILD_DEPS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: Apptainer: installing build dependencies ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

GO=$(command -v go || true)
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || true
[ -n "$GO" ] || unavailable "building Apptainer needs Go (>= 1.22): none on PATH or at /usr/local/go/bin"
export PATH="$(dirname "$GO"):$PATH"

mkdir -p "$home/apptainer"
work="$home/apptainer/.build-$version"
log="$home/apptainer/build-$version.log"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
echo "setup: Apptainer $version: building from $src into $prefix (about 6 min of CPU; log: $log)"
start=$SECONDS
exec 3>&1  # progress lines reach the terminal while the build's own output goes to the log
step() { echo "setup: Apptainer: $1 ($((SECONDS - start)) s)" >&3; }
{
  tar -xzf "$src" -C "$work"
  cd "$work/$top"
  step "fetching Go modules" 
  go mod download
  step "configuring (--without-suid)"
  ./mconfig --without-suid -p "$prefix"
  step "compiling"
  make -C builddir -j"$(nproc)"
  step "installing"
  make -C builddir install
} >"$log" 2>&1 || {
  tail -n 15 "$log" >&2
  unavailable "the build failed (log: $log)"
}
touch "$prefix/.nearmetal-built"
ln -sfn "$version" "$home/apptainer/current"
echo "setup: Apptainer $version: built in $((SECONDS - start)) s: $prefix/bin/apptainer"
