"""The explainers (explain/explainers/): evidence of a slow variant and its baseline in, the
verdict (cause present, its fact, strength and ablation) out; the recovered share's interval;
ablation variants valid as study variants; the Why paragraph."""

import math
import random

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.explain import ablation as ab
from nearmetal.explain import simd
from nearmetal.explain.candidates import identical, rank, slower_answers
from nearmetal.explain.evidence import Evidence, launch_env
from nearmetal.explain.explainers import EXPLAINERS
from nearmetal.explain.share import recovered_share
from nearmetal.explain.why import gap_quantities, paragraph, share_of

pytestmark = pytest.mark.unit

NATIVE_OMPI = {"mode": "native", "runtime": None, "mpi": "openmpi", "image": None}
HYBRID = {"name": "hyb", "mode": "hybrid", "runtime": "charliecloud", "mpi": "openmpi", "image": "default"}


def ev(variant, context=None, env=None, ranks=None, wall=None, **kw):
    return Evidence("x", dict(variant), context or {}, env or {}, ranks or [], wall or [], **kw)


def rank_dict(rank, cpu, allowed=None, **kw):
    return {"rank": rank, "cpu_start": cpu, "cpu_end": cpu, "cpus_allowed": allowed or [cpu], "migrations": 0,
            "ns": {"user": 1, "ipc": 2}, **kw}


def examine(name, slow, base):
    return EXPLAINERS.get(name)().examine(slow, base)


def test_every_explainer_is_registered_and_says_what_it_explains():
    names = EXPLAINERS.names()
    for want in ("transport", "binding", "namespaces", "preload", "image", "quota", "seccomp", "mpi_library", "simd",
                 "startup", "mpi_profile", "runtime_setup"):
        assert want in names
    assert all(cls.title for cls in EXPLAINERS.all())


def test_no_explainer_finds_a_cause_between_identical_evidence():
    a = ev(HYBRID, {"transport": {"tcp_within_node": False, "between_ranks": ["vader"]}}, {"A": "1"},
           [[rank_dict(0, 0), rank_dict(1, 1)]], [1.0, 1.1])
    b = ev(HYBRID, {"transport": {"tcp_within_node": False, "between_ranks": ["vader"]}}, {"A": "1"},
           [[rank_dict(0, 0), rank_dict(1, 1)]], [1.0, 1.1])
    tested, untested, where = rank(a, b, processes=False)
    assert not tested and not untested and not where


# ------------------------------------------------------------------ transport

def test_transport_tcp_set_in_the_variant_env_is_removed_by_its_ablation():
    slow = ev({**NATIVE_OMPI, "name": "tcp", "env": {"OMPI_MCA_btl": "self,tcp", "X": "1"}},
              env={"OMPI_MCA_btl": "self,tcp"})
    [c] = examine("transport", slow, ev(NATIVE_OMPI))
    assert "OMPI_MCA_btl=self,tcp" in c.fact and c.strength >= 0.9
    assert c.ablation["env"] == {"X": "1"} and c.ablation["mode"] == "native"


def test_transport_excluding_vader_by_caret_counts_but_a_shm_list_does_not():
    base = ev(NATIVE_OMPI)
    assert examine("transport", ev({**NATIVE_OMPI, "env": {"OMPI_MCA_btl": "^vader"}}, env={"OMPI_MCA_btl": "^vader"}), base)
    assert not examine("transport", ev({**NATIVE_OMPI, "env": {"OMPI_MCA_btl": "self,vader,tcp"}},
                                       env={"OMPI_MCA_btl": "self,vader,tcp"}), base)


def test_transport_reads_ucx_exclusions_by_name():
    """^sm or ^posix,sysv leave UCX's shared memory out; ^cma,tcp (what nearmetal sets for MPICH
    between namespaces) keeps it, and is no cause; a list without a shared-memory name is one."""
    base = ev({**NATIVE_OMPI, "mpi": "mpich"})
    for value, cause in (("^sm", True), ("^posix,sysv", True), ("^mm", True), ("^cma,tcp", False),
                         ("^tcp", False), ("tcp,self", True), ("posix,self", False), ("all", False)):
        slow = ev({**NATIVE_OMPI, "mpi": "mpich", "env": {"UCX_TLS": value}}, env={"UCX_TLS": value})
        assert bool(examine("transport", slow, base)) is cause, value
    smcuda = ev({**NATIVE_OMPI, "env": {"OMPI_MCA_btl": "^smcuda"}}, env={"OMPI_MCA_btl": "^smcuda"})
    assert not examine("transport", smcuda, ev(NATIVE_OMPI))  # not "sm" by substring


def test_transport_cma_off_is_a_weaker_cause():
    key = "OMPI_MCA_btl_vader_single_copy_mechanism"
    [c] = examine("transport", ev({**NATIVE_OMPI, "env": {key: "none"}}, env={key: "none"}), ev(NATIVE_OMPI))
    assert "single-copy" in c.fact and c.strength < 0.9 and key not in c.ablation.get("env", {})


def test_transport_fallback_reported_by_the_mpi_forces_shared_memory_per_family():
    tcp = {"transport": {"tcp_within_node": True, "between_ranks": ["tcp"]}}
    shm = {"transport": {"tcp_within_node": False, "between_ranks": ["vader"]}}
    [c] = examine("transport", ev(HYBRID, tcp), ev(NATIVE_OMPI, shm))
    assert "talked over tcp" in c.fact and "vader" in c.fact
    assert c.ablation["env"] == {"OMPI_MCA_btl": "self,vader"}
    [m] = examine("transport", ev({**HYBRID, "mpi": "mpich"}, tcp), ev(NATIVE_OMPI, shm))
    assert m.ablation["env"] == {"UCX_TLS": "self,sm"}
    [iso] = examine("transport", ev({**HYBRID, "network": "isolated"}, tcp), ev(NATIVE_OMPI, shm))
    assert "network" not in iso.ablation and iso.factor == "host-network"
    assert not examine("transport", ev(HYBRID, tcp), ev(NATIVE_OMPI, tcp))  # both fell back: no difference


# ------------------------------------------------------------------ preload

def test_audit_dimension_and_ld_audit_env_are_unset_by_their_ablations():
    [c] = examine("preload", ev({**HYBRID, "audit": True}), ev(NATIVE_OMPI))
    assert "audit" not in c.ablation and c.strength >= 0.8
    slow = ev({**HYBRID, "env": {"LD_AUDIT": "/x/aud.so"}}, env={"LD_AUDIT": "/x/aud.so"})
    [c] = examine("preload", slow, ev(NATIVE_OMPI))
    assert "LD_AUDIT=/x/aud.so" in c.fact and "env" not in c.ablation


def test_preload_seen_only_by_the_ranks_is_a_cause_without_an_ablation():
    slow = ev(HYBRID, ranks=[[rank_dict(0, 0, ld_preload="/lib/x.so"), rank_dict(1, 1)]])
    [c] = examine("preload", slow, ev(NATIVE_OMPI, ranks=[[rank_dict(0, 0), rank_dict(1, 1)]]))
    assert "LD_PRELOAD=/lib/x.so" in c.fact and c.ablation is None


def test_preload_in_both_is_no_cause():
    env = {"LD_PRELOAD": "/lib/x.so"}
    assert not examine("preload", ev(HYBRID, env=env), ev(NATIVE_OMPI, env=env))


# ------------------------------------------------------------------ binding, quota, seccomp, namespaces

def test_ranks_on_one_core_against_own_cores():
    slow = ev(HYBRID, ranks=[[rank_dict(0, 0), rank_dict(1, 0)]] * 4)
    base = ev(NATIVE_OMPI, ranks=[[rank_dict(0, 0), rank_dict(1, 1)]] * 4)
    [c] = examine("binding", slow, base)
    assert "shared one CPU" in c.fact and c.strength >= 0.9 and c.ablation is None and "--bind-to core" in c.fix


def test_cpuset_option_is_dropped_with_its_value():
    slow = ev({**HYBRID, "runtime": "podman", "runtime_args": ["--cpuset-cpus", "0", "--rm"]})
    [c] = examine("binding", slow, ev(NATIVE_OMPI))
    assert c.ablation["runtime_args"] == ["--rm"]
    slow = ev({**HYBRID, "runtime": "podman", "runtime_args": ["--cpuset-cpus=0"]})
    [c] = examine("binding", slow, ev(NATIVE_OMPI))
    assert "runtime_args" not in c.ablation


def test_unbound_ranks_are_bound_by_their_ablation():
    """A variant run with binding = "none" beside a bound baseline: its ablation is the same
    variant with binding = "core" (the launchers bind each rank), nothing else changed."""
    slow = ev({**HYBRID, "binding": "none"}, ranks=[[rank_dict(0, 0, [0, 1]), rank_dict(1, 0, [0, 1])]] * 4)
    base = ev(NATIVE_OMPI, ranks=[[rank_dict(0, 0), rank_dict(1, 1)]] * 4)
    [c] = examine("binding", slow, base)
    assert 'binding = "none"' in c.fact and c.ablation == {**HYBRID, "binding": "core"}
    assert 'binding = "core"' in c.fix
    assert examine("binding", ev({**HYBRID, "binding": "none"}), ev({**NATIVE_OMPI, "binding": "none"})) == []


def test_cgroup_quota_below_the_ranks_is_strong():
    r = lambda i, q: rank_dict(i, i, cgroup={"cpu_quota_cores": q, "memory_limit_bytes": None, "version": 1})  # noqa: E731
    slow = ev({**HYBRID, "runtime_args": ["--cpus=1"]}, ranks=[[r(0, 1.0), r(1, 1.0)]])
    base = ev(NATIVE_OMPI, ranks=[[r(0, None), r(1, None)]])
    [c] = examine("quota", slow, base)
    assert "allowed 1 CPUs' time for 2 ranks" in c.fact and c.strength >= 0.9 and "runtime_args" not in c.ablation
    assert not examine("quota", ev(HYBRID, ranks=[[r(0, None)]]), base)


def test_seccomp_filter_only_in_the_variant():
    slow = ev(HYBRID, ranks=[[rank_dict(0, 0, seccomp=2)]])
    [c] = examine("seccomp", slow, ev(NATIVE_OMPI, ranks=[[rank_dict(0, 0, seccomp=0)]]))
    assert c.strength < 0.5 and c.ablation is None
    slow = ev({**HYBRID, "runtime_args": ["--security-opt", "seccomp=/p.json"]})
    [c] = examine("seccomp", slow, ev(NATIVE_OMPI))
    assert "runtime_args" not in c.ablation


def test_separate_namespaces_per_rank_and_the_runtime_option_that_makes_them():
    sep = [[{**rank_dict(0, 0), "ns": {"user": 10, "ipc": 20}}, {**rank_dict(1, 1), "ns": {"user": 11, "ipc": 21}}]]
    slow = ev({**HYBRID, "runtime": "apptainer", "mpi": "mpich", "runtime_args": ["--userns"]}, ranks=sep)
    [c] = examine("namespaces", slow, ev(NATIVE_OMPI, ranks=[[rank_dict(0, 0), rank_dict(1, 1)]]))
    assert "separate ipc and user namespaces" in c.fact and "runtime_args" not in c.ablation
    assert not examine("namespaces", ev({**HYBRID, "runtime": "charliecloud"}), ev(NATIVE_OMPI))


# ------------------------------------------------------------------ image, MPI library, simd

def test_image_factors_one_ablation_each():
    slow = ev({**HYBRID, "cold": True, "image_place": "/tmp/x", "image_format": "squashfs"})
    causes = examine("image", slow, ev(NATIVE_OMPI))
    assert [c.factor for c in causes] == ["warm", "image-in-place", "default-format"]
    assert "cold" not in causes[0].ablation and causes[0].ablation["image_place"] == "/tmp/x"
    assert "image_place" not in causes[1].ablation and causes[1].ablation["cold"] is True


def test_hybrid_mode_suggests_bind_mode_and_names_the_libraries():
    slow = ev(HYBRID, {"witness": [{"rank": "0", "library": "/img/libmpi.so.40", "version": "4.1.4"}]})
    base = ev(NATIVE_OMPI, {"witness": [{"rank": "0", "library": "/usr/lib/libmpi.so.40", "version": "4.1.5"}]})
    [c] = examine("mpi_library", slow, base)
    assert c.ablation["mode"] == "bind" and "4.1.4" in c.fact and "4.1.5" in c.fact
    assert not examine("mpi_library", ev({**HYBRID, "mode": "bind"}), ev(NATIVE_OMPI))


def test_simd_widest_instruction_from_a_disassembly():
    lines = ["  401000:\tadd    %rax,%rbx", "  401004:\tmulpd  %xmm1,%xmm0", "  401008:\tvaddpd %ymm1,%ymm2,%ymm0"]
    assert simd.widest(lines)[0] == "avx"
    assert simd.widest(lines[:2])[0] == "sse"
    assert simd.widest(["  1:\tvaddsd %xmm1,%xmm2,%xmm0"])[0] == "avx128"
    assert simd.widest(["  1:\tvaddpd %zmm1,%zmm2,%zmm0"])[0] == "avx512"
    assert simd.cpu_level(["sse2", "avx", "avx2"]) == "avx" and simd.cpu_level(["avx512f"]) == "avx512"


def test_simd_lower_build_is_a_cause():
    slow, base = ev(HYBRID, simd={"level": "sse", "cpu": "avx512"}), ev(NATIVE_OMPI, simd={"level": "avx"})
    [c] = examine("simd", slow, base)
    assert "SSE" in c.fact and "AVX/AVX2" in c.fact and c.ablation is None
    assert not examine("simd", base, slow)


def test_simd_ablation_is_the_study_image_with_the_widest_build_of_the_same_mpi():
    slow_variant = {**HYBRID, "image": "portable"}
    others = [({**HYBRID, "image": "avx2"}, "avx"), ({**HYBRID, "image": "skx"}, "avx512"),
              ({**HYBRID, "mpi": "mpich", "image": "mpich-skx"}, "avx512"), ({**HYBRID, "image": "old"}, "sse")]
    assert simd.wider_image(slow_variant, "sse", others) == "skx"
    assert simd.wider_image(slow_variant, "avx512", others) is None
    assert simd.wider_image(slow_variant, "sse", others[3:]) is None  # no wider build: advice only
    slow = ev(slow_variant, simd={"level": "sse", "cpu": "avx512", "wider_image": "skx"})
    [c] = examine("simd", slow, ev(NATIVE_OMPI, simd={"level": "avx512"}))
    assert c.ablation == {**slow_variant, "image": "skx"} and "skx" in c.fact and c.fix.startswith("use the image skx")


def test_runtime_setup_in_the_rank_process_explains_cpu_before_main():
    slow = ev(HYBRID, startup={"cpu_to_main": 0.0042})
    [c] = examine("runtime_setup", slow, ev(NATIVE_OMPI, startup={"cpu_to_main": 0.0022}))
    assert c.fact.startswith("ch-run sets up the container") and "+2.0 ms of CPU per rank before main" in c.fact
    assert c.ablation is None and not c.descriptive and c.fix.startswith("none needed")
    assert not examine("runtime_setup", slow, ev(NATIVE_OMPI, startup={"cpu_to_main": 0.0041}))  # within 0.5 ms
    podman = ev({**HYBRID, "runtime": "podman"}, startup={"cpu_to_main": 0.0042})  # conmon/runc: other processes
    assert not examine("runtime_setup", podman, ev(NATIVE_OMPI, startup={"cpu_to_main": 0.0022}))
    assert not examine("runtime_setup", ev(HYBRID), ev(NATIVE_OMPI))  # no start-up kernel: no evidence


# ------------------------------------------------------------------ where the time went

def test_startup_share_of_the_gap():
    r = lambda i, t: rank_dict(i, i, t_init_end_s=t)  # noqa: E731
    slow = ev(HYBRID, ranks=[[r(0, 0.30), r(1, 0.31)]] * 3, wall=[1.3, 1.3, 1.3])
    base = ev(NATIVE_OMPI, ranks=[[r(0, 0.10), r(1, 0.11)]] * 3, wall=[1.0, 1.0, 1.0])
    [c] = examine("startup", slow, base)
    assert c.descriptive and math.isclose(c.details["startup_share"], 2 / 3)
    assert "the extra wall time is spent in start-up, which figures the program measures after MPI_Init do not " \
           "include" in c.fact
    assert c.fact.startswith("MPI_Init ends 200.00 ms later per launch than the baseline's, 67% of its 300.0 ms")
    early = ev(HYBRID, ranks=[[r(0, 0.05), r(1, 0.06)]] * 3, wall=[1.3, 1.3, 1.3])
    [c] = examine("startup", early, base)
    # not "0% of its longer wall time" after "earlier", which read as a contradiction
    assert c.fact.startswith("start-up is not slower (MPI_Init ends 50.00 ms earlier per launch than the baseline's): "
                             "its 300.0 ms longer wall time per run is spent in what follows MPI_Init"), c.fact
    assert "0%" not in c.fact
    hardly = ev(HYBRID, ranks=[[r(0, 0.10001), r(1, 0.11001)]] * 3, wall=[1.3, 1.3, 1.3])
    [c] = examine("startup", hardly, base)
    assert "ms later per launch than the baseline's, under 1% of its 300.0 ms longer wall time" in c.fact, c.fact


def test_mpi_profile_names_what_grew():
    def prof(coll, out):
        return {"classes": {"collective": {"calls": 10, "time_s": coll}, "p2p": {"calls": 1, "time_s": 0.0}},
                "in_mpi_s": coll, "outside_mpi_s": out, "wall_s": coll + out}
    slow = ev(HYBRID, ranks=[[rank_dict(0, 0, mpi_profile=prof(0.5, 1.0))]])
    base = ev(NATIVE_OMPI, ranks=[[rank_dict(0, 0, mpi_profile=prof(0.1, 1.0))]])
    [c] = examine("mpi_profile", slow, base)
    assert c.descriptive and c.details["top"] == "collective" and c.fact.startswith("per rank and run: collectives +400.0 ms")


# ------------------------------------------------------------------ ranking, evidence helpers

def test_rank_puts_testable_causes_first_strongest_first_and_tests_one_change_once():
    slow = ev({**HYBRID, "audit": True, "cold": True, "env": {"OMPI_MCA_btl": "self,tcp"}},
              {"transport": {"tcp_within_node": True, "between_ranks": ["tcp"]}}, env={"OMPI_MCA_btl": "self,tcp"})
    tested, untested, where = rank(slow, ev(NATIVE_OMPI), processes=False)
    assert [c.explainer for c in tested][:2] == ["transport", "preload"]
    assert len({repr(c.ablation) for c in tested}) == len(tested)


def test_launch_env_reads_the_launchers_pairs():
    argv = ["mpirun", "-x", "A=1", "-np", "2", "p"]
    assert launch_env({"B": "2"}, argv) == {"A": "1", "B": "2"}
    assert launch_env({}, ["mpiexec.hydra", "-genv", "C", "3", "-env", "D", "4", "p"]) == {"C": "3", "D": "4"}


def test_identical_pairs_and_slower_answers():
    assert identical({**NATIVE_OMPI, "name": "a"}, {**NATIVE_OMPI, "name": "b"})
    assert not identical({**NATIVE_OMPI, "name": "a"}, {**NATIVE_OMPI, "name": "b", "audit": True})
    analysis = {"answers": {"by_variant": [{"variant": "v", "verdict": "equivalent"}, {"variant": "w", "verdict": "slower"},
                                           {"variant": "abl", "verdict": "slower"}],
                            "by_benchmark": [{"variant": "v", "benchmark": "lat", "verdict": "slower"}]}}
    assert [(e["variant"], b) for e, b in slower_answers(analysis, skip={"abl"})] == [("v", ["lat"]), ("w", [])]


# ------------------------------------------------------------------ the recovered share

def _points(rng, slow, base, abl, n=10, sd=0.02, hib=False):
    noise = lambda: math.exp(rng.gauss(0, sd))  # noqa: E731
    return [{"slow": {b: slow * noise() for b in range(n)}, "base": {b: base * noise() for b in range(n)},
             "ablation": {b: abl * noise() for b in range(n)}, "hib": hib}]


@pytest.mark.parametrize("abl, want", [(1.0, 1.0), (2.0, 0.0), (math.sqrt(2), 0.5)])
def test_recovered_share_on_the_log_scale_with_an_interval_around_it(abl, want):
    out = recovered_share(_points(random.Random(3), 2.0, 1.0, abl))
    assert abs(out["share"] - want) < 0.05
    assert out["low"] < out["share"] < out["high"] and out["high"] - out["low"] < 0.2
    assert out["n_blocks"] == 10 and out["n_points"] == 1
    assert abs(out["vs_baseline"]["ratio"] - abl) < 0.05 * abl and abs(out["vs_slow"]["ratio"] - abl / 2) < 0.05
    assert out["vs_slow"]["low"] < out["vs_slow"]["ratio"] < out["vs_slow"]["high"]


def test_recovered_share_for_a_rate_counts_a_lower_rate_as_the_gap():
    out = recovered_share(_points(random.Random(4), 1.0, 2.0, 2.0, hib=True))
    assert abs(out["share"] - 1.0) < 0.05


def test_recovered_share_needs_a_positive_gap_and_two_common_blocks():
    assert recovered_share(_points(random.Random(5), 1.0, 1.0, 1.0, sd=0.0))["share"] is None  # no gap
    one = _points(random.Random(6), 2.0, 1.0, 1.0)
    one[0]["ablation"] = {0: 1.0}
    assert recovered_share(one)["share"] is None


def test_recovered_share_interval_covers_the_truth_mostly():
    rng, hits = random.Random(7), 0
    for _ in range(40):
        out = recovered_share(_points(rng, 2.0, 1.0, 1.2, n=8, sd=0.1), n_boot=400)
        hits += out["low"] <= 1 - math.log(1.2) / math.log(2) <= out["high"]
    assert hits >= 32  # a percentile bootstrap of 8 blocks covers a little under its 95%


# ------------------------------------------------------------------ ablations as variants, the paragraph

def test_ablation_name_is_a_valid_variant_name_and_says_the_factor():
    name = ab.name_for("hybrid/charliecloud/openmpi/default+audit", "no-audit")
    assert name == "hybrid-charliecloud-openmpi-default-audit--no-audit"
    long = ab.name_for("x" * 100, "no-ld-audit")
    assert len(long) <= 64 and long.endswith("--no-ld-audit") and long != ab.name_for("x" * 99, "no-ld-audit")


def test_ablation_validated_by_the_variant_model():
    v = ab.as_variant({**HYBRID, "env": {"OMPI_MCA_btl": "self,vader"}, "ranks_per_node": 2}, "h--shm")
    assert v["name"] == "h--shm" and v["env"] == {"OMPI_MCA_btl": "self,vader"} and v["ranks_per_node"] == 2
    native = ab.as_variant(NATIVE_OMPI, "n--x")
    assert native["mode"] == "native" and native.get("runtime") is None
    with pytest.raises(NearmetalError, match="ablation bad: mode"):
        ab.as_variant({**HYBRID, "mode": "warp"}, "bad")


def test_fix_as_toml_and_run_flags():
    v = {"name": "h--shm", **{k: x for k, x in HYBRID.items() if k != "name"}, "env": {"OMPI_MCA_btl": "self,vader"}}
    toml = ab.toml_of(v)
    import tomllib

    assert tomllib.loads(toml)["variant"][0] == {k: x for k, x in v.items() if x is not None}
    assert ab.run_flags(v) == ("nearmetal run --mode hybrid --mpi openmpi --runtime charliecloud --image default "
                               "--env OMPI_MCA_btl=self,vader -- PROGRAM")


def test_paragraph_of_a_tested_cause_an_untested_one_and_none():
    cause = {"fact": "LD_AUDIT=/a.so in the ranks", "factor": "no-ld-audit", "fix": "unset LD_AUDIT",
             "ablation": {"mode": "native"}, "share": {"share": 0.93, "low": 0.8, "high": 1.05, "n_blocks": 10}}
    entry = {"name": "Audited", "overhead_pct": 12.0, "benchmarks": ["latency"], "causes": [cause], "cause": cause}
    text = paragraph(entry)
    assert text.startswith("Audited is +12% slower (latency). Cause: LD_AUDIT=/a.so in the ranks.")
    assert "recovered 93% [80% to 105%] of the gap over 10 blocks. Fix: unset LD_AUDIT." in text
    untested = {**entry, "cause": None, "causes": [{**cause, "share": None}]}
    assert "not tested yet" in paragraph(untested)
    nothing = {**entry, "cause": None, "causes": [], "where": [], "has_profile": False}
    assert "Nothing in the recorded evidence explains the gap" in paragraph(nothing)
    assert "No MPI profile" in paragraph(nothing)
    assert paragraph({**entry, "identical": True}).endswith("no difference to explain.")
    # slower on one quantity, not overall: the head names that quantity and its own figure
    partial = {**entry, "verdict": "inconclusive", "overhead_pct": 0.25,
               "slower_on": ["start-up cpu_to_main +64% [+37 to +97%]"]}
    assert paragraph(partial).startswith("Audited is slower on start-up cpu_to_main +64% [+37 to +97%]. Cause:")
    assert paragraph({**entry, "overhead_pct": 0.25}).startswith("Audited is +0.2% slower (latency).")
    # slower overall by a mean over two benchmarks, one of them slower: that one's own figure leads
    # (a new user read "x3.45 slower (latency)" where latency was x11.5 and x3.45 the mean with halo)
    both = {**entry, "verdict": "slower", "overhead_pct": 245.0, "n_answered": 2,
            "slower_on": ["latency ×11.5 [×8.97 to ×14.8]"]}
    assert paragraph(both).startswith("Audited is slower on latency ×11.5 [×8.97 to ×14.8] (overall ×3.45). Cause:")
    assert paragraph({**both, "n_answered": 1}).startswith("Audited is slower on latency ×11.5 [×8.97 to ×14.8]. ")


def test_a_share_whose_interval_reaches_zero_is_a_likely_cause_not_the_cause():
    """A new user's explain said "Cause: ..." for 57% [-23% to 124%]: an interval that reaches 0
    does not show the change recovers anything. The gap in explain's own blocks is said beside
    the share (the head's figure is the study's; the share is of the blocks it was measured in)."""
    from nearmetal.explain.why import confirmed

    share = {"share": 0.57, "low": -0.23, "high": 1.24, "n_blocks": 8,
             "vs_baseline": {"ratio": 1.15}, "vs_slow": {"ratio": 1.15 / 1.35}}
    assert not confirmed(share) and confirmed({**share, "low": 0.2}) and not confirmed({**share, "low": None})
    assert not confirmed({**share, "share": 0.4, "low": 0.1})
    likely = {"fact": "OMPI_MCA_btl=self,tcp in the ranks", "factor": "no-btl", "fix": "unset OMPI_MCA_btl",
              "ablation": {"mode": "hybrid"}, "share": share}
    entry = {"name": "hybrid-tcp", "overhead_pct": 11.0, "benchmarks": ["latency"], "causes": [likely],
             "likely": likely}
    assert paragraph(entry) == (
        "hybrid-tcp is +11% slower (latency). Likely cause, not confirmed: OMPI_MCA_btl=self,tcp in the ranks. "
        "Changing only that (no-btl) recovered 57% [-23% to 124%] of the gap over 8 blocks, in which the variant "
        "ran at ×1.35 the baseline's cost and the change at ×1.15: its interval reaches 0, so these blocks do not "
        "show that it recovers anything; more blocks would settle it (explain runs more while its budget and the "
        "study's max_repetitions allow). Fix: unset OMPI_MCA_btl.")
    no_interval = {**likely, "share": {**share, "low": None, "high": None}}
    assert ("recovered 57% of the gap over 8 blocks, in which the variant ran at ×1.35 the baseline's cost and the "
            "change at ×1.15: too few blocks for an interval, so") in paragraph({**entry, "likely": no_interval})
    sure = {**likely, "share": {**share, "low": 0.3}}
    assert paragraph({**entry, "likely": None, "cause": sure}).startswith(
        "hybrid-tcp is +11% slower (latency). Cause: OMPI_MCA_btl=self,tcp in the ranks. Changing only that (no-btl) "
        "recovered 57% [30% to 124%] of the gap over 8 blocks, in which the variant ran at ×1.35")


# ------------------------------------------------------------------ the study keys and the command line

STUDY_TEXT = '[study]\nname = "s"\n{}\n[[benchmark]]\nkernel = "latency"\n'


def test_study_explain_keys_are_validated():
    from nearmetal.study.plan.study_file import parse

    cfg = parse(STUDY_TEXT.format("explain = true\nexplain_budget = 120.0"))
    assert cfg.study.explain is True and cfg.study.explain_budget == 120
    assert parse(STUDY_TEXT.format("")).study.explain is False
    with pytest.raises(NearmetalError, match="explain_budget"):
        parse(STUDY_TEXT.format("explain_budget = -1.0"))
    with pytest.raises(NearmetalError, match="study.explain"):
        parse(STUDY_TEXT.format('explain = "yes"'))


def test_explain_command_line():
    from nearmetal.cli_parser import build_parser

    args = build_parser("explain").parse_args(["explain", "--db", "x.db", "--study", "s", "--budget", "30"])
    assert (args.db, args.study, args.budget) == ("x.db", "s", 30.0)
    for bad in ("0", "-5", "inf", "soon"):
        with pytest.raises(SystemExit):
            build_parser("explain").parse_args(["explain", "--budget", bad])


def test_io_layer_that_grew_most_is_named():
    slow = ev(HYBRID, io_layers={"mpiio": 0.30, "posix": 0.25})
    base = ev(NATIVE_OMPI, io_layers={"mpiio": 0.10, "posix": 0.09})
    [c] = examine("io_layer", slow, base)
    assert c.descriptive and c.details["top"] == "mpiio" and "mpiio +200.0 ms, posix +160.0 ms" in c.fact
    assert not examine("io_layer", base, slow) and not examine("io_layer", ev(HYBRID), base)


def test_slow_launches_on_particular_cpus():
    from nearmetal.analysis import modes
    from nearmetal.explain.why import cpus_by_mode

    values = [0.18, 0.19, 0.69, 0.18, 0.70, 0.68, 0.19, 0.18, 0.71, 0.185]
    found = modes.detect(values)
    assert found is not None
    blocks = list(range(len(values)))
    slow_runs = {2, 4, 5, 8}
    ranks_of = {100 + b: [{"cpu_start": 0}, {"cpu_start": 0 if b in slow_runs else 1}] for b in blocks}
    text = cpus_by_mode(values, blocks, {b: 100 + b for b in blocks}, ranks_of, found)
    assert text == "the slow launches had their ranks on CPUs 0, 0 (one CPU shared) in 100% of cases, the fast ones in 0%"
    same = {100 + b: [{"cpu_start": 0}, {"cpu_start": 1}] for b in blocks}
    assert cpus_by_mode(values, blocks, {b: 100 + b for b in blocks}, same, found) is None
    # a rate: the slow launches are the low ones
    rates = [1 / v for v in values]
    assert "100% of cases" in cpus_by_mode(rates, blocks, {b: 100 + b for b in blocks}, ranks_of, modes.detect(rates),
                                           higher_is_better=True)


def test_gather_from_a_real_store_without_per_rank_evidence(tmp_path):
    """A store of the schema as it is: contexts, env and argv read; no per-rank evidence, so the
    explainers that need it say nothing rather than guess."""
    import json

    from nearmetal.explain.evidence import gather
    from nearmetal.study.store.store import Store

    with Store(tmp_path / "s.db") as store:
        planned = [{"run_key": f"b|n=2|t=1|{v}#rep0", "position": i, "block": 0, "repetition": 0, "warmup": False,
                    "benchmark": "b", "kernel": "latency", "variant": v, "variant_json": {"name": v, "mode": "native",
                                                                                           "mpi": "openmpi"},
                    "ranks": 2, "threads": 1} for i, v in enumerate(("base", "slow"))]
        sid = store.create_study("s", "", 1, 0.03, {}, "0", "now", planned=planned)
        ctx = store.context_id({"transport": {"tcp_within_node": True, "between_ranks": ["tcp"]}})
        for r in store.runs(sid):
            argv = ["mpirun", "-x", "OMPI_MCA_btl=self,tcp", "p"] if r["variant"] == "slow" else ["mpirun", "p"]
            store.finish_run(r["id"], "ok", 0, argv, {}, ctx, "now", 1.5, "", [])
        found = gather(store, sid)
    assert set(found) == {"base", "slow"}
    assert found["slow"].env == {"OMPI_MCA_btl": "self,tcp"} and found["slow"].context["transport"]["tcp_within_node"]
    assert found["slow"].wall_s == [1.5] and not found["slow"].has_ranks
    assert json.dumps(found["base"].variant) and examine("binding", found["slow"], found["base"]) == []


def _why_of(tmp_path, ablation_values):
    """The Why section of a stored explain plan with one tested candidate whose ablation measured these values."""
    import json

    from nearmetal.explain.why import PLAN_KEY, section
    from nearmetal.study.store.store import Store

    blocks = list(range(6))
    point = lambda v, vals: {"variant": v, "benchmark": "lat", "metric": "latency", "unit": "us",  # noqa: E731
                             "higher_is_better": False, "point": {"size": 8}, "ranks": 2, "threads": 1,
                             "values": vals, "blocks": blocks}
    rng = random.Random(11)
    noisy = lambda x: [x * math.exp(rng.gauss(0, 0.02)) for _ in blocks]  # noqa: E731
    analysis = {"variants": [{"id": "base", "mode": "native", "mpi": "openmpi"},
                             {"id": "slow", "mode": "native", "mpi": "openmpi", "audit": True}],
                "points": [point("base", noisy(1.0)), point("slow", noisy(2.0)), point("slow--no-audit", ablation_values)],
                "answers": {"by_variant": [{"variant": "slow", "baseline": "base", "verdict": "slower", "name": "slow",
                                            "overhead_pct": 100.0}], "by_benchmark": []}}
    cause = {"explainer": "preload", "fact": "the ranks ran under the auditor", "strength": 0.8, "factor": "no-audit",
             "ablation": {"name": "slow--no-audit", "mode": "native", "mpi": "openmpi"},
             "ablation_id": "slow--no-audit", "fix": "unset LD_AUDIT", "descriptive": False, "details": {}}
    plan = {"answers": [{"variant": "slow", "baseline": "base", "benchmarks": [], "causes": [cause], "where": [],
                         "has_profile": False}], "ablations": ["slow--no-audit"], "next_block": 6, "rounds": 1}
    with Store(tmp_path / "w.db") as store:
        sid = store.create_study("w", "", 1, 0.03, {}, "0", "now")
        store.set_meta(PLAN_KEY.format(sid), json.dumps(plan))
        return section(store, sid, analysis)


def test_why_section_of_a_cause_its_ablation_confirms(tmp_path):
    why = _why_of(tmp_path, [1.0 * math.exp(0.01 * (i % 3)) for i in range(6)])
    [a] = why["answers"]
    assert why["tested"] and a["cause"]["explainer"] == "preload" and a["cause"]["share"]["share"] > 0.9
    assert 'name = "slow--no-audit"' in a["fix_toml"] and a["text"].startswith("slow is ×2 slower. Cause:")


def test_why_section_of_a_cause_its_ablation_refutes(tmp_path):
    why = _why_of(tmp_path, [2.0 * math.exp(0.01 * (i % 3)) for i in range(6)])
    [a] = why["answers"]
    assert "cause" not in a and "fix_toml" not in a
    assert "Nothing tested explains the gap" in a["text"]


def test_the_share_is_of_the_gap_the_answer_states_not_of_every_metric_of_its_benchmark():
    """A cold container's start-up: the primary quantity (to after MPI_Init) has a gap warming
    recovers whole; its CPU time to main, slower too, is the container's own and warming leaves
    it. The share is the primary quantity's; per benchmark, without a slower primary one, its
    slower ones; with no quantity slower (an overall answer only), the primary ones."""
    rng = random.Random(7)

    def point(variant, bench, metric, value, ranks=2):
        return {"variant": variant, "benchmark": bench, "metric": metric, "point": {"rank": "max"}, "ranks": ranks,
                "blocks": list(range(10)), "values": [value * math.exp(rng.gauss(0, 0.01)) for _ in range(10)]}

    def entry(bench, metric, primary, verdict, ranks=None):
        return {"variant": "slow", "benchmark": bench, "metric": metric, "primary": primary, "verdict": verdict,
                "ranks": ranks, "threads": None}

    values = {"slow": (2.0, 3.0), "base": (1.0, 1.0), "warm": (1.0, 3.0)}  # (to_after_init, cpu_to_main)
    analysis = {"points": [point(v, "startup", m, x[i]) for v, x in values.items()
                           for i, m in enumerate(("to_after_init", "cpu_to_main"))],
                "answers": {"by_benchmark": [entry("startup", "to_after_init", True, "slower"),
                                             entry("startup", "cpu_to_main", False, "slower")]}}
    assert gap_quantities(analysis, "slow") == {("startup", "to_after_init", None, None)}
    out = share_of(analysis, "slow", "base", "warm", ["startup"])
    assert out["n_points"] == 1 and abs(out["share"] - 1.0) < 0.05
    by = analysis["answers"]["by_benchmark"]
    by[0]["verdict"] = "equivalent"  # only the CPU time is slower
    assert gap_quantities(analysis, "slow") == {("startup", "cpu_to_main", None, None)}
    assert abs(share_of(analysis, "slow", "base", "warm", ["startup"])["share"]) < 0.05
    by[1]["verdict"] = "inconclusive"  # nothing slower on its own: the primary quantity
    assert gap_quantities(analysis, "slow") == {("startup", "to_after_init", None, None)}
    by[1]["verdict"] = "slower"
    by.append(entry("io", "io_time", True, "slower", ranks=4))  # a second benchmark, one of its placements
    analysis["points"] += [point(v, "io", "io_time", x[0], ranks=r) for v, x in values.items() for r in (2, 4)]
    assert gap_quantities(analysis, "slow") == {("startup", "cpu_to_main", None, None), ("io", "io_time", 4, None)}
    assert share_of(analysis, "slow", "base", "warm", ["startup", "io"])["n_points"] == 2  # io at 2 ranks left out
    analysis["answers"]["by_benchmark"] = []  # no answer per quantity: every point of the benchmarks
    assert share_of(analysis, "slow", "base", "warm", ["startup"])["n_points"] == 2


def test_the_busy_machine_count_is_the_studys_own_runs_not_explains_ablations(tmp_path):
    """After explain, the answer's 'N of M runs were taken on a busy machine' counts the runs the
    study measured, not the ablation runs explain added later (on a machine busy by then)."""
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.store.store import Store

    load = {"load_start": 0.1, "load_end": 0.1, "steal_pct": 0.0, "others_cpu_s": 0.0, "own_cpu_s": 1.0, "cpus": 2,
            "busy": 0, "quiet": None, "quiet_wait_s": None}
    with Store(tmp_path / "s.db") as store:
        planned = [{"run_key": f"b|n=2|t=1|{v}#rep{k}", "position": 3 * k + i, "block": k, "repetition": k,
                    "warmup": False, "benchmark": "b", "kernel": "latency", "variant": v,
                    "variant_json": {"name": v, "mode": "native", "mpi": "openmpi"}, "ranks": 2, "threads": 1}
                   for k in range(4) for i, v in enumerate(("base", "slow", "slow-fixed"))]
        sid = store.create_study("s", "", 1, 0.03, {"variant": "base"}, "0", "now", planned=planned)
        for r in store.runs(sid):
            busy = r["variant"] == "slow-fixed" or r["run_key"].endswith("#rep0") and r["variant"] == "slow"
            store.finish_run(r["id"], "ok", 0, ["p"], {}, None, "now", 1.0, "",
                             [{"metric": "latency", "unit": "us", "value": 1.0, "point": {"size": 8}}],
                             load=dict(load, busy=int(busy), others_cpu_s=1.5 if busy else 0.0))
        everything = analyze(store, "s", n_boot=50)["contention"]
        own = analyze(store, "s", n_boot=50, later_variants=["slow-fixed"])["contention"]
    assert (everything["disturbed"], everything["runs"]) == (5, 12)
    assert (own["disturbed"], own["runs"]) == (1, 8) and own["text"].startswith("1 of 8 measured runs were taken on a busy")


def test_no_slower_answer_but_undecided_ones_says_what_would_decide_them():
    """A new user's noisy study: explain said only "no slower answer to explain". Undecided
    answers are not explain's to test: said, with what the study said would decide them when it
    stopped."""
    import json as json_mod

    from nearmetal.explain.stage import _undecided_words
    from nearmetal.study.execute import machine_check

    class Meta:  # the store's meta table, all that is read
        def __init__(self, kept):
            self.kept = kept

        def meta(self, key):
            return json_mod.dumps(self.kept) if key == machine_check._KEY.format(7) and self.kept else None

    analysis = {"answers": {"by_benchmark": [{"verdict": "inconclusive"}, {"verdict": "equivalent"},
                                             {"verdict": "inconclusive"}]}}
    stop = "Stopped after 2 blocks (40 s of runs): ... What would help: widen the margin to ±25%."
    assert _undecided_words(analysis, Meta({"stop": {"text": stop}}), 7) == (
        "; 2 answers are undecided: the study's blocks did not settle them, and explain tests the causes of slower "
        f"answers only. The study said: {stop}")
    assert _undecided_words(analysis, Meta(None), 7).endswith(  # fixed repetitions: no max_time to lengthen
        "slower answers only (more blocks would: more repetitions, in a new study, or a quieter machine)")
    assert _undecided_words({**analysis, "sequential": {"adaptive": True}}, Meta(None), 7).endswith(
        "(more blocks would: a longer max_time or a larger max_repetitions, or a quieter machine)")
    assert _undecided_words({"answers": {"by_benchmark": [{"verdict": "equivalent"}]}}, Meta(None), 7) == ""


def test_the_progress_line_says_which_round_of_how_many_and_the_budget_left():
    """Each round of an undecided share: not the same line each time, but where explain is."""
    from types import SimpleNamespace

    from nearmetal.explain.stage import round_words

    study = SimpleNamespace(first_blocks=4, most_blocks=30)  # at most 8 rounds of 4 blocks (the last one short)
    assert round_words(1, study, 312.4) == ("explain: a candidate's share is not decided yet: round 2 of at most 8 "
                                            "(312 s of the budget left)")
    assert round_words(2, study, -3.0).endswith("round 3 of at most 8 (0 s of the budget left)")
    assert round_words(0, SimpleNamespace(first_blocks=0, most_blocks=5), 10).count("at most 5") == 1


def test_a_baseline_with_some_slow_launches_is_not_said_to_have_no_modes():
    """'40% slow against 20% natively; the baseline's launches do not fall into these modes'
    contradicted itself (a new user): the baseline's own launches were too few slow ones for the
    groups to be found in them alone, yet 20% sat in the slow group."""
    from nearmetal.explain.why import _noise

    base = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99]  # no groups of its own
    point = {"benchmark": "latency", "metric": "latency", "point": {"size": 8}}
    analysis = {"points": [{**point, "variant": "b", "values": base},
                           {**point, "variant": "v", "values": base, "comparison": {"modes": {"k": 2}}}],
                "answers": {"by_benchmark": [{"variant": "v", "baseline": "b", "benchmark": "latency",
                                              "verdict": "inconclusive", "label": "latency", "name": "V",
                                              "modes": {"text": "at 8 B launches fall into two groups: 0.38 and "
                                                                "1.2 us, 40% slow against 20% natively",
                                                        "share_baseline": 0.2, "share_variant": 0.4,
                                                        "share_differs": False}}]}}
    [said] = _noise(analysis)
    assert said["machine"] and "do not fall into these modes" not in said["text"], said
    assert "the baseline's launches fall into the same groups (20% slow), so the groups are the machine's, and " \
           "the shares are not shown to differ: not shown to be the variant's" in said["text"], said["text"]
    analysis["answers"]["by_benchmark"][0]["modes"].update(share_differs=True)
    assert _noise(analysis)[0]["text"].endswith("; the variant makes slow launches more common.")
    for few in (0.0, 0.05):  # none, or one outlier in twenty: no groups of the baseline's
        analysis["answers"]["by_benchmark"][0]["modes"].update(share_baseline=few)
        assert "do not fall into these modes: the variant makes them" in _noise(analysis)[0]["text"]


def test_a_study_resumed_after_explain_is_not_extended_over_explains_blocks(tmp_path):
    """explain's blocks follow the study's; a resumed adaptive study counted them as its own and
    went on planning looks (runs no report showed) and rewrote its recorded end (found in
    review). explain closes the study at its first block: extend adds nothing after that, the
    end stays, and the study's own analysis is the one it had before explain."""
    import json

    from nearmetal.explain.why import PLAN_KEY, analyses
    from nearmetal.study.config.ids import variant_id
    from nearmetal.study.execute import runner
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.plan.sequential import blocks_measured, close, closed_at, recorded_end
    from nearmetal.study.records import OK, Cell, RunResult, RunSpec
    from nearmetal.study.store import codec

    text = ('[study]\nname = "p"\nmin_repetitions = 5\nmax_repetitions = 40\nmax_time = 100000\nwarmup = 0\nseed = 5\n'
            'margin = 0.03\n[matrix]\nmode = ["native", "hybrid"]\nmpi = ["mpich"]\nranks = [2]\n'
            '[[benchmark]]\nkernel = "latency"\nname = "lat"\n')
    rng = random.Random(1)

    def finish(store, sid):
        for run in store.pending(sid):
            slow = json.loads(run["variant_json"]).get("mode") == "hybrid"
            value = (1.2 if slow else 1.0) * (1 + rng.gauss(0, 0.02))
            rec = [{"metric": "latency", "unit": "us", "value": value, "point": {"size": 8}}]
            codec.store_result(store, run["id"], RunResult(OK, 0, ["x"], {}, None, "t", 0.5, None, rec))

    cfg = config_mod.parse(text, source="p.toml")
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "p.db", resume=False, say=lambda m: None)
    with store:
        finish(store, sid)
        while runner.extend(cfg, store, sid, say=lambda m: None):
            finish(store, sid)
        before, _ = analyses(store, "p", sid, n_boot=100)
        end, own_blocks = recorded_end(store, sid), blocks_measured(store.runs(sid))
        # explain's round: the slow variant, its baseline and an ablation, in blocks after the study's
        rows = store.runs(sid)
        vj = {r["variant"]: json.loads(r["variant_json"]) for r in rows}
        slow = next(v for v in vj.values() if v["mode"] == "hybrid")
        base = next(v for v in vj.values() if v["mode"] == "native")
        fix = {**slow, "name": "fix"}
        store.set_meta(PLAN_KEY.format(sid), json.dumps({"answers": [], "ablations": [variant_id(fix)],
                                                         "next_block": own_blocks + 13, "rounds": 1}))
        close(store, sid, own_blocks)
        position = max(r["position"] for r in rows) + 1
        specs = [RunSpec(Cell(cfg.benchmark[0], v, 2, 1), b, position + 3 * i + k, b, False)
                 for i, b in enumerate(range(own_blocks, own_blocks + 13)) for k, v in enumerate((slow, base, fix))]
        store.add_planned(sid, [codec.planned_row(s) for s in specs])
        finish(store, sid)
        said = []
        assert runner.extend(cfg, store, sid, say=said.append) == 0  # `study --resume` plans nothing more
        assert said == [f"explain added blocks of its own from block {own_blocks + 1} on: the study's answers stay "
                        f"those of its {own_blocks} blocks, and it is not extended"]
        assert recorded_end(store, sid) == end and closed_at(store, sid) == own_blocks
        after, every = analyses(store, "p", sid, n_boot=100)
        assert after["answers"] == before["answers"] and after["runs"] == before["runs"]
        assert any(p["variant"] == variant_id(fix) for p in every["points"])  # the shares read explain's blocks
        # `study --resume` counts the runs as the report does, explain's 39 said apart
        n_own = len(rows)
        assert runner.runs_said(store, sid) == f"{n_own} runs (and 39 that explain added), 0 to run"
        assert sum(after["runs"]["by_status"].values()) == n_own


def test_the_modes_line_says_when_the_variant_makes_the_machines_slow_launches_more_common():
    """Both sides' launches fall into the same two groups, but 90% of the variant's are slow
    against 50% of the baseline's: the line must not call it only the machine's (a review
    found it contradicting the answer above it); equal shares stay the machine's."""
    import random

    from nearmetal.explain.why import _noise

    rng = random.Random(1)

    def launches(n_slow):
        return [1.0 + rng.random() * 0.01 for _ in range(20 - n_slow)] + [2.0 + rng.random() * 0.01 for _ in range(n_slow)]

    def line(variant_slow, differs):
        e = {"verdict": "inconclusive", "variant": "v", "baseline": "b", "benchmark": "lat", "label": "8 B",
             "modes": {"text": "two groups", "share_baseline": 0.5, "share_variant": variant_slow / 20,
                       "share_differs": differs}}
        point = {"benchmark": "lat", "metric": "latency", "point": {"size": 8}}
        analysis = {"answers": {"by_benchmark": [e]},
                    "points": [{**point, "variant": "v", "values": launches(variant_slow), "comparison": {"modes": {"found": True}}},
                               {**point, "variant": "b", "values": launches(10)}]}
        [said] = _noise(analysis)
        return said["text"]

    assert "the machine's, though the variant makes slow launches more common" in line(18, True)
    assert "a property of the machine, not of the variant" in line(10, False)


def test_transport_on_a_generic_image_tests_the_tuned_image_not_a_transport_it_lacks(nm_home):
    """A walk-through's Why offered OMPI_MCA_btl=self,vader on the generic image, which has no
    vader: all 6 runs of that ablation failed. On a generic image the factor is the image: its
    ablation is the same release and MPIs built without --generic, where that image is here."""
    import json as _json

    def image(name, generic):
        d = nm_home / "images" / name
        (d / "rootfs").mkdir(parents=True)
        (d / "image.json").write_text(_json.dumps({"name": name, "distro": "bookworm", "mpis": ["mpich", "openmpi"],
                                                   "generic": generic}))

    image("nm-bookworm-generic-mpich-openmpi", True)
    tcp = {"transport": {"tcp_within_node": True, "between_ranks": ["tcp"]}}
    shm = {"transport": {"tcp_within_node": False, "between_ranks": ["vader"]}}
    slow = ev({**HYBRID, "image": "nm-bookworm-generic-mpich-openmpi"}, tcp)
    [c] = examine("transport", slow, ev(NATIVE_OMPI, shm))
    assert "is a generic build, without the shared-memory transport" in c.fact and c.ablation is None
    assert "build one" in c.fix
    image("nm-bookworm-mpich-openmpi", False)
    [c] = examine("transport", slow, ev(NATIVE_OMPI, shm))
    assert c.ablation["image"] == "nm-bookworm-mpich-openmpi" and "env" not in c.ablation, c.ablation


def test_an_ablation_whose_runs_all_failed_is_said_and_offers_no_fix():
    """A walk-through's explain tested two causes; one ablation's 6 runs all failed and the Why
    then never mentioned it (nor that it failed). It is said, with the runs' error, beside the
    cause that was tested, and it is not offered as a fix."""
    from nearmetal.explain.why import paragraph

    tested = {"fact": "hybrid mode: the ranks ran the image's MPI library", "factor": "bind-mode",
              "ablation_id": "v--bind-mode", "fix": "bind the host's MPI", "ablation": {"mode": "bind"},
              "share": {"share": 0.95, "low": 0.9, "high": 1.0, "n_blocks": 6}}
    failed = {"fact": "ranks on one node talked over tcp", "factor": "shm", "ablation_id": "v--shm",
              "fix": "give the ranks shared memory", "ablation": {"env": {"OMPI_MCA_btl": "self,vader"}},
              "share": {"share": None, "n_blocks": 0}, "failed": {"runs": 6, "why": "Component: vader not found"}}
    entry = {"name": "v", "overhead_pct": 40.0, "benchmarks": ["lat"], "causes": [tested, failed], "likely": tested,
             "where": [], "has_profile": True, "slower_on": [], "verdict": "slower"}
    text = paragraph(entry)
    assert "Not tested: ranks on one node talked over tcp: the 6 runs of its ablation (v--shm) failed " \
           "(Component: vader not found)." in text, text
    only = paragraph({**entry, "causes": [failed], "likely": None})
    assert "gave no values to compare (its 6 runs failed: Component: vader not found)." in only and "Fix:" not in only
    # a spent --budget left its runs planned: nothing failed, and explain goes on when run again
    pending = {**failed, "failed": None, "pending": 14}
    waiting = paragraph({**entry, "causes": [pending], "likely": None})
    assert ("its ablation (v--shm) is not measured yet (14 of its runs still planned: run `nearmetal explain` "
            "again). Fix: give the ranks shared memory.") in waiting, waiting
    assert "failed" not in waiting


def test_the_why_says_no_io_layer_of_a_benchmark_the_variant_is_not_slower_on():
    """A walk-through's Why explained a 1 KiB latency slowdown with the I/O layers of the traced
    netCDF benchmark, whose own answer was undecided: the traced benchmark's layers are said
    only where the variant is slower on it."""
    import json as _json

    from nearmetal.explain.why import PLAN_KEY, section

    io_fact = {"explainer": "io_layer", "fact": "I/O time per traced process: netcdf +2.1 ms", "descriptive": True}
    prof = {"explainer": "mpi_profile", "fact": "per rank and run: point-to-point +1 ms", "descriptive": True}

    class Store:  # what section() reads: explain's stored plan and the runs (none failed)
        def meta(self, key):
            return _json.dumps({"answers": [{"variant": "h", "causes": [], "where": [io_fact, prof]}],
                                "ablations": []}) if key == PLAN_KEY.format(1) else None

        def runs(self, study_id):
            return []

    def why(slower_on):
        analysis = {"variants": [{"id": "h"}, {"id": "n"}],
                    "answers": {"by_variant": [{"variant": "h", "baseline": "n", "verdict": "slower", "name": "h"}],
                                "by_benchmark": [{"variant": "h", "benchmark": b, "verdict": "slower"}
                                                 for b in slower_on]},
                    "traces": [{"variant": "h", "benchmark": "io-nc4", "status": "ok", "dir": "/nonexistent"}]}
        [answer] = section(Store(), 1, analysis)["answers"]
        return [w["explainer"] for w in answer["where"]]

    assert why(["lat1k"]) == ["mpi_profile"]
    assert why(["lat1k", "io-nc4"]) == ["io_layer", "mpi_profile"]


def test_the_fix_flags_line_is_never_wrapped():
    """Printed at 80 columns (no terminal) the run flags broke into two lines, which pasted as two
    commands."""
    import io

    from rich.console import Console

    from nearmetal.report.why import render_why

    flags = ("nearmetal run --mode hybrid --mpi openmpi --runtime charliecloud --image default "
             "--env OMPI_MCA_btl=self,vader -- PROGRAM")
    out = io.StringIO()
    render_why({"answers": [{"text": "v is slower.", "fix_toml": "[[variant]]\nname = \"v\"\n", "fix_flags": flags}]},
               Console(file=out, width=60, force_terminal=False))
    assert "  " + flags in out.getvalue().splitlines()
