#!/usr/bin/env bash
# Set up nearmetal on a Debian 12 machine: system packages, a virtual environment with the
# package, the host kernels and the default image. Idempotent: a second run only checks.
#   --test   also the package's `test` extra (pytest, jsonschema, ...): scripts/test.sh
#   --create-user NAME   only this: create (or complete) the unprivileged account that
#            `nearmetal run --user NAME` runs ranks as — a system account with a home and,
#            for rootless podman, /etc/subuid and /etc/subgid ranges (docs/privilege.md).
#            Never done otherwise. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# The account `run --user NAME` runs the ranks as (suggested name: nmuser).
create_user() {
  local name=$1
  if ! [[ "$name" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]]; then
    echo "setup: --create-user needs an account name (a-z, 0-9, _ and -, at most 32; e.g. nmuser), got '$name'" >&2
    return 2
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: --create-user needs root (it runs useradd)" >&2
    return 2
  fi
  if getent passwd "$name" >/dev/null; then
    if [ "$(id -u "$name")" -eq 0 ]; then
      echo "setup: account $name is uid 0: not an unprivileged account" >&2
      return 2
    fi
    echo "setup: account $name exists (uid $(id -u "$name"))"
  else
    useradd --system --create-home --home-dir "/home/$name" --shell /usr/sbin/nologin --user-group "$name"
    echo "setup: created system account $name (uid $(id -u "$name"), home /home/$name)"
  fi
  # Rootless podman maps the image's users through 65536 subordinate ids: the first free
  # block at or above 100000 in both files (useradd gives none to system accounts).
  local uid have_uid have_gid start
  uid=$(id -u "$name")
  have_uid=$(awk -F: -v n="$name" -v u="$uid" '($1 == n || $1 == u) && $3 > 0' /etc/subuid 2>/dev/null | head -1)
  have_gid=$(awk -F: -v n="$name" -v u="$uid" '($1 == n || $1 == u) && $3 > 0' /etc/subgid 2>/dev/null | head -1)
  if [ -z "$have_uid" ] || [ -z "$have_gid" ]; then
    touch /etc/subuid /etc/subgid
    start=$(cat /etc/subuid /etc/subgid | awk -F: 'BEGIN { end = 100000 } $2 + $3 > end { end = $2 + $3 } END { print end }')
    start=$(( (start + 65535) / 65536 * 65536 ))
    [ -n "$have_uid" ] || usermod --add-subuids "$start-$((start + 65535))" "$name"
    [ -n "$have_gid" ] || usermod --add-subgids "$start-$((start + 65535))" "$name"
    echo "setup: gave $name subordinate ids $start-$((start + 65535)) (/etc/subuid, /etc/subgid: rootless podman)"
  else
    echo "setup: $name has subordinate ids (/etc/subuid: ${have_uid#*:}; /etc/subgid: ${have_gid#*:})"
  fi
}

WITH_TEST=0
case "${1:-}" in
  --test) WITH_TEST=1 ;;
  --create-user) create_user "${2:-}"; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--test | --create-user NAME]" >&2; exit 2 ;;
esac

PACKAGES=(
  openmpi-bin libopenmpi-dev mpich libmpich-dev            # both MPI families
  charliecloud-runtime bubblewrap podman runc uidmap       # container runtimes
  squashfs-tools squashfuse fuse3 debootstrap              # image building and SquashFS images
  gcc make pkg-config libc6-dev tar                        # kernels
  libpnetcdf-dev pnetcdf-bin libnetcdf-mpi-dev libnetcdf-pnetcdf-dev  # parallel I/O for nm-iobench
  libhdf5-openmpi-dev libhdf5-mpich-dev netcdf-bin hdf5-tools
  slurm-wlm slurmctld slurmd slurm-client munge            # a real local Slurm cluster
  graphviz                                                 # `trace report`: the call-path graph (dot -Tsvg)
)
if [ "$WITH_TEST" -eq 1 ]; then
  # Real MPI applications (Debian's builds, Open MPI) that the tests run as benchmarks
  PACKAGES+=(gromacs hpcc quantum-espresso)
  # A real headless browser: the HTML report's first screen is measured in it (selenium)
  PACKAGES+=(chromium chromium-driver)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Reinstall only when pyproject.toml or the entry script (copied into .venv/bin, not linked)
# changed, or the test extra is wanted and not yet in: the venv keeps the hash it was
# installed from, followed by " test" when the extra came with it.
stamp=.venv/.nearmetal-pyproject
hash=$(cat pyproject.toml bin/nearmetal | sha256sum | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
if [ "$WITH_TEST" -eq 1 ]; then spec=".[test]"; want="$hash test"; else spec="."; want="$hash"; fi
if { [ "$have" != "$want" ] && [ "$have" != "$hash test" ]; } || ! .venv/bin/python -c "import nearmetal" 2>/dev/null; then
  .venv/bin/pip install -q --upgrade pip >/dev/null
  # compat mode: a plain path entry keeps interpreter start-up lean for `nearmetal run`.
  .venv/bin/pip install -q -e "$spec" --config-settings editable_mode=compat
  echo "$want" > "$stamp"
fi

# The tests' second MPI installation (--mpi mpich@PREFIX): Debian's MPICH packages
# extracted into a prefix of their own, as a site keeps several MPIs beside the system's.
SECOND_MPICH=/opt/nm-second-mpich
if [ "$WITH_TEST" -eq 1 ] && [ ! -x "$SECOND_MPICH/usr/bin/mpiexec.hydra" ]; then
  echo "setup: extracting Debian's MPICH into $SECOND_MPICH (a second installation for the tests)"
  debs=$(mktemp -d)
  rm -rf "$SECOND_MPICH.tmp"
  (cd "$debs" && apt-get download -qq mpich libmpich12 libmpich-dev 2>/dev/null)
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$SECOND_MPICH.tmp"; done
  mv "$SECOND_MPICH.tmp" "$SECOND_MPICH"
  rm -rf "$debs"
fi

# Byte-compile now: with PYTHONDONTWRITEBYTECODE set, every `nearmetal run` would recompile.
.venv/bin/python -m compileall -q src >/dev/null

export USER=${USER:-$(id -un)}
# Apptainer: the one on PATH, else built once from NEARMETAL_APPTAINER_SRC, else a one-line
# note that it is unavailable (an error with NEARMETAL_REQUIRE_APPTAINER=1).
bash scripts/apptainer.sh
.venv/bin/nearmetal kernels build
# The default image: host distro, both MPIs, as a directory, a SquashFS file and a podman image.
.venv/bin/nearmetal image build --format dir
.venv/bin/nearmetal image build --format squashfs
.venv/bin/nearmetal image build --format podman
# ... and a SIF, where Apptainer is there to build and run it.
if .venv/bin/python -c "import sys; from nearmetal.runtimes import get; sys.exit(0 if get('apptainer').path() else 1)"; then
  .venv/bin/nearmetal image build --format sif
fi
