"""One table per C backend list (nearmetal.ctables): the trace layers (trace/csrc/nm-layers.def)
and nm-iobench's backends (kernels/csrc/iobench/backends.def) are read by the C, the build and
the Python side, so a new layer or backend is one C file plus one table line.

Unit tests parse tables, the shipped ones and a copy with a line added; the integration tests
build a copied source tree with a new layer / backend (one C file + one line) and run it."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nearmetal import ctables, families, trace
from nearmetal.errors import NearmetalError
from nearmetal.io import libraries
from nearmetal.kernels import iobench_backends
from nearmetal.trace import build as trace_build
from nearmetal.trace import reader, render

TRACE_CSRC = Path(trace.CSRC)
KERNELS_CSRC = Path(iobench_backends.TABLE).parents[1]
NEW_LAYER = 'NM_LAYER(DEMO, demo, 0, "#123456")\n'
NEW_BACKEND = 'NM_IO_BACKEND(demo, "")\n'


def _copy_with_line(src, tmp_path, table, line):
    copy = tmp_path / src.name
    shutil.copytree(src, copy)
    with open(copy / table, "a") as f:
        f.write(line)
    return copy


# ------------------------------------------------------------------ the parser (unit)

@pytest.mark.unit
def test_parse_reads_names_integers_and_strings_and_skips_comments():
    text = ('/* X(a, b) in a comment is not a row */\n#define X(a, b) a\n'
            'X(one, 1, "#fff")\n  X(two, -2, "a:b c:d") // trailing comment\nY(other, 3)\n')
    assert ctables.parse(text, "X") == [("one", 1, "#fff"), ("two", -2, "a:b c:d")]


@pytest.mark.unit
def test_parse_refuses_an_argument_it_cannot_read_with_the_line():
    with pytest.raises(NearmetalError, match=r"t\.def:2: cannot read X\(one, 1 \+ 1\)"):
        ctables.parse("\nX(one, 1 + 1)\n", "X", "t.def")


# ------------------------------------------------------------------ the shipped tables (unit)

@pytest.mark.unit
def test_trace_layers_come_from_the_tracers_table():
    assert trace.ALL_LAYERS == reader.LAYERS == ("netcdf", "pnetcdf", "hdf5", "mpiio", "posix")
    assert trace.DEFAULT_LAYERS == ("netcdf", "pnetcdf", "mpiio", "posix")
    assert set(render.LAYER_COLOURS) == {"app", *trace.ALL_LAYERS}
    assert trace_build.SOURCES[3:] == tuple(f"layer-{name}.c" for name in trace.ALL_LAYERS)
    assert {"nm-trace.h", "nm-layers.def", "nc-common.h"} <= set(trace_build.HEADERS)


@pytest.mark.unit
def test_iobench_backends_come_from_the_kernels_table():
    assert iobench_backends.names() == ("posix", "mpiio", "pnetcdf", "netcdf4", "hdf5")
    assert libraries.names() == iobench_backends.names()  # the I/O study describes each backend
    assert families.get("openmpi").image_io_packages == ("libpnetcdf-dev", "libnetcdf-mpi-dev", "libhdf5-openmpi-dev")
    assert families.get("mpich").image_io_packages == ("libhdf5-mpich-dev",)
    for name in iobench_backends.names():
        assert (KERNELS_CSRC / "iobench" / f"{name}.c").is_file(), name


@pytest.mark.unit
def test_a_layer_line_added_to_a_copied_table_reaches_the_python_side(tmp_path):
    copy = _copy_with_line(TRACE_CSRC, tmp_path, "nm-layers.def", NEW_LAYER)
    assert [layer.name for layer in trace.layers(str(copy))] == [*trace.ALL_LAYERS, "demo"]
    assert trace.layers(str(copy))[-1] == trace.Layer("demo", False, "#123456")
    assert trace_build.sources(str(copy))[-1] == "layer-demo.c"


@pytest.mark.unit
def test_a_backend_line_added_to_a_copied_table_reaches_the_python_side(tmp_path):
    copy = _copy_with_line(KERNELS_CSRC, tmp_path, "iobench/backends.def",
                           'NM_IO_BACKEND(demo, "openmpi:libdemo-dev")\n')
    rows = ctables.read(str(copy / "iobench" / "backends.def"), "NM_IO_BACKEND")
    assert [name for name, _ in rows] == [*iobench_backends.names(), "demo"]
    assert rows[-1] == ("demo", "openmpi:libdemo-dev")


# ------------------------------------------------------------------ building a new one (integration)

DEMO_LAYER = r'''/* A layer of one function, as a new layer would be: its names, its wrappers. */
#include "nm-trace.h"
const char *const nm_names_demo[] = {"demo_call"};
const int nm_count_demo = 1;
'''

DEMO_BACKEND = r'''/* A backend that is never available: enough for -A to list it. */
#include "iobench.h"
const nm_io_backend nm_io_demo = {.name = "demo", .ext = ".demo", .unavailable = "a demonstration only"};
'''


def test_a_new_layer_is_one_c_file_and_one_table_line(tmp_path):
    copy = _copy_with_line(TRACE_CSRC, tmp_path, "nm-layers.def", NEW_LAYER)
    (copy / "layer-demo.c").write_text(DEMO_LAYER)
    lib = tmp_path / "nm-trace-demo.so"
    sources = [str(copy / f) for f in trace_build.sources(str(copy))]
    subprocess.run(["cc", *trace_build.FLAGS, "-o", str(lib), *sources, *trace_build.LIBS], check=True, timeout=300)
    out = subprocess.run(["/bin/true"], capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ["PATH"], "LD_PRELOAD": str(lib), "NM_TRACE_DIR": str(tmp_path),
                              "NM_TRACE_LAYERS": "nosuchlayer"})
    assert "(known: netcdf pnetcdf hdf5 mpiio posix demo)" in out.stderr, out.stderr


def test_a_new_iobench_backend_is_one_c_file_and_one_table_line(tmp_path):
    copy = _copy_with_line(KERNELS_CSRC, tmp_path, "iobench/backends.def", NEW_BACKEND)
    (copy / "iobench" / "demo.c").write_text(DEMO_BACKEND)
    listed = subprocess.run(["make", "-s", "-C", str(copy), "list-iobench"], capture_output=True, text=True,
                            timeout=120, check=True).stdout.split()
    assert listed == [*iobench_backends.names(), "demo"]
    prefix = tmp_path / "built"
    family = families.names()[0]
    subprocess.run(["make", "-s", "-C", str(copy), f"MPI={family}", f"PREFIX={prefix}", f"{prefix}/bin/nm-iobench"],
                   capture_output=True, text=True, timeout=600, check=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run([str(prefix / "bin" / "nm-iobench"), "-A"], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert "demo unavailable: a demonstration only" in out.stdout.splitlines(), out.stdout
    refused = subprocess.run([str(prefix / "bin" / "nm-iobench"), "-L", "nosuch"], capture_output=True, text=True,
                             timeout=120, env=env)
    assert "(choose from: posix mpiio pnetcdf netcdf4 hdf5 demo)" in refused.stderr, refused.stderr
