"""Ranks of one node talked over TCP where the baseline's used shared memory, or the MPI's
single-copy (CMA) path was turned off (seed 001: GROMACS 4x slower in containers whose ranks
fell back to TCP). Evidence: the context's `transport` (what the MPI itself reported,
families/_transport.py) and the environment settings that choose transports. Ablation: the
setting removed; where the variant sets none, the shared-memory transport forced (Open MPI
OMPI_MCA_btl=self,vader; UCX, which Debian's MPICH uses, UCX_TLS=self,sm), or an isolated
network given back the host's."""

from ...networks import is_default
from . import EXPLAINERS
from .base import Explainer, replaced, with_env, without_env

_SHM = ("vader", "sm", "shm", "mm", "posix", "sysv", "cma", "xpmem", "knem", "smcuda")


def _names(value):
    """(an exclusion list?, the transports it names): "^a,b" names what is left out."""
    value = value.strip()
    return value.startswith("^"), {n.strip() for n in value.lstrip("^").split(",") if n.strip()}


def _btl_leaves_shm_out(value):
    excluded, names = _names(value)
    return bool(names & {"vader", "sm"}) if excluded else not names & set(_SHM)


def _ucx_leaves_shm_out(value):
    # UCX's aliases: sm and shm are every shared-memory transport, mm the segment ones. An
    # exclusion such as ^cma,tcp (nearmetal's own between namespaces) keeps posix and sysv.
    excluded, names = _names(value)
    if excluded:
        return bool(names & {"sm", "shm", "mm"}) or {"posix", "sysv"} <= names
    return not names & set(_SHM + ("all",))


# settings that choose transports: (key, its value leaves shared memory out?)
_CHOOSERS = {
    "OMPI_MCA_btl": _btl_leaves_shm_out,
    "UCX_TLS": _ucx_leaves_shm_out,
    "MPIR_CVAR_NOLOCAL": lambda v: v.strip().lower() in ("1", "true", "yes"),
    "MPIR_CVAR_CH4_SHM_ENABLE": lambda v: v.strip().lower() in ("0", "false", "no"),
}
_CMA_OFF = {"OMPI_MCA_btl_vader_single_copy_mechanism": lambda v: v.strip().lower() == "none",
            "UCX_CMA_ENABLE": lambda v: v.strip().lower() in ("n", "no", "0", "false")}


def _generic_image(variant):
    """(its name, the same release and MPIs built without --generic where that image is here,
    else None) when the variant's image is a generic build (image/generic.py); else None."""
    from ...errors import NearmetalError
    from ...image import default_name, resolve
    from ...models import in_container

    if not in_container(variant.get("mode") or "native"):
        return None
    try:
        image = resolve(variant.get("image") or "default")
        if not image.meta.get("generic"):
            return None
        tuned = default_name(image.distro, image.mpis)
        try:
            resolve(tuned)
        except NearmetalError:
            tuned = None
    except (NearmetalError, OSError):
        return None
    return image.name, tuned


def force_shared_memory(variant):
    """The variant with the shared-memory transport forced, as its MPI family allows
    (families' shared_memory_env)."""
    from ... import families

    family = str(variant.get("mpi") or "").partition("@")[0]
    try:
        env = families.get(family).shared_memory_env
    except Exception:  # noqa: BLE001 - an MPI family this nearmetal does not know
        return None
    return with_env(variant, **env) if env else None


@EXPLAINERS.register
class Transport(Explainer):
    title = "the ranks' transport: TCP instead of shared memory, or single-copy (CMA) off"

    def examine(self, slow, base):
        found = []
        own = slow.variant.get("env") or {}
        for table, what, strength in ((_CHOOSERS, "leaves shared memory out", 0.9),
                                      (_CMA_OFF, "turns the single-copy (CMA) path off", 0.6)):
            for key, off in table.items():
                value = slow.env.get(key)
                if value is None or base.env.get(key) == value or not off(value):
                    continue
                ablation = without_env(slow.variant, key) if key in own else None
                found.append(self.cause(f"{key}={value} {what} for the ranks; the baseline does not set it",
                                        strength, factor=f"no-{key.lower().replace('_', '-')}"[:28],
                                        ablation=ablation, fix=f"unset {key} for the ranks"))
        if found:
            return found
        st, bt = slow.context.get("transport") or {}, base.context.get("transport") or {}
        if st.get("tcp_within_node") and not bt.get("tcp_within_node"):
            used = ", ".join(st.get("between_ranks") or ["tcp"])
            theirs = ", ".join(bt.get("between_ranks") or []) or "shared memory"
            if not is_default(slow.variant.get("network")):
                return [self.cause(f"ranks on one node talked over {used} (network '{slow.variant['network']}': a "
                                   f"rank per emulated node); the baseline's over {theirs}", 0.9, factor="host-network",
                                   ablation=replaced(slow.variant, network=None),
                                   fix="run the ranks on the host's network and IPC namespace")]
            generic = _generic_image(slow.variant)
            if generic is not None:  # no shared-memory transport in it to force: the tuned image is the factor
                name, tuned = generic
                return [self.cause(f"ranks on one node talked over {used}: image '{name}' is a generic build, "
                                   f"without the shared-memory transport (image build --generic); the baseline's "
                                   f"over {theirs}", 0.9, factor="tuned-image",
                                   ablation=replaced(slow.variant, image=tuned) if tuned else None,
                                   fix=f"use an image built without --generic ({tuned or 'build one'})")]
            return [self.cause(f"ranks on one node talked over {used}; the baseline's over {theirs}", 0.9,
                               factor="shm", ablation=force_shared_memory(slow.variant),
                               fix="give the ranks the shared-memory transport (the host's IPC namespace and "
                                   "/dev/shm, an MPI built with it)")]
        return []
