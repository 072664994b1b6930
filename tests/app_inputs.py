"""Small inputs for the real applications Debian packages (GROMACS, HPCC, Quantum ESPRESSO),
made offline: a water box from GROMACS's own force fields, an hpccinf.txt from HPCC's
example, and a pw.x input with a hydrogen pseudopotential written here."""

import math
import os
import subprocess

APP_IMAGE = "nm-test-apps"
APP_PACKAGES = "gromacs,hpcc,quantum-espresso"


def gromacs_tpr(directory, nsteps=4000):
    """topol.tpr: 221 SPC/E waters in a 2 nm box (OPLS-AA), reaction-field, `nsteps` steps of 2 fs."""
    d, nsteps = str(directory), int(nsteps)  # numbers only in the generated lines
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "topol.top"), "w") as f:
        f.write('#include "oplsaa.ff/forcefield.itp"\n#include "oplsaa.ff/spce.itp"\n\n'
                "[ system ]\nwater\n\n[ molecules ]\n")
    with open(os.path.join(d, "md.mdp"), "w") as f:
        f.write(f"integrator = md\nnsteps = {nsteps}\ndt = 0.002\ncutoff-scheme = Verlet\n"
                "coulombtype = reaction-field\nrcoulomb = 0.8\nrvdw = 0.8\nconstraints = h-bonds\n"
                "nstxout-compressed = 0\nnstenergy = 0\nnstlog = 0\n")
    for argv in (["gmx_mpi", "solvate", "-cs", "spc216.gro", "-box", "2", "2", "2", "-o", "water.gro", "-p", "topol.top"],
                 ["gmx_mpi", "grompp", "-f", "md.mdp", "-c", "water.gro", "-p", "topol.top", "-o", "topol.tpr"]):
        subprocess.run(argv, cwd=d, check=True, capture_output=True, timeout=120)
    return os.path.join(d, "topol.tpr")


def hpcc_input(directory, n=600, nb=50):
    """hpccinf.txt for 2 ranks (a 1 x 2 grid), HPL size n."""
    d = str(directory)
    os.makedirs(d, exist_ok=True)
    with open("/usr/share/doc/hpcc/examples/_hpccinf.txt") as f:
        text = f.read()
    text = (text.replace("1000         Ns", f"{n:<13d}Ns").replace("80           NBs", f"{nb:<13d}NBs")
            .replace("2            Ps", "1            Ps"))
    path = os.path.join(d, "hpccinf.txt")
    with open(path, "w") as f:
        f.write(text)
    return path


def qe_input(directory, celldm=10.0, ecut=30.0):
    """(pw.x input, pseudopotential): an H2 molecule with a local soft-Coulomb hydrogen
    (V(r) = -2 erf(r/0.5)/r Ry, 1s pseudo-wavefunction), UPF v1."""
    d, celldm, ecut = str(directory), float(celldm), float(ecut)  # numbers only in the generated lines
    os.makedirs(d, exist_ok=True)
    r, x = [], 0
    while math.exp(-7.0 + x * 0.0125) <= 60.0:
        r.append(math.exp(-7.0 + x * 0.0125))
        x += 1

    def col(values):
        return "\n".join("  " + " ".join(f"{v:.12e}" for v in values[k:k + 4]) for k in range(0, len(values), 4))

    upf = (f"<PP_INFO>\n  Local soft-Coulomb hydrogen for nearmetal's tests.\n</PP_INFO>\n<PP_HEADER>\n"
           "   0                   Version Number\n   H                   Element\n"
           "   NC                  Norm - Conserving pseudopotential\n    F                  Nonlinear Core Correction\n"
           " SLA  PW   NOGX NOGC   PZ   Exchange-Correlation functional\n    1.00000000000      Z valence\n"
           "    0.00000000000      Total energy\n    0.0000000    0.0000000 Suggested cutoff for wfc and rho\n"
           "    0                  Max angular momentum component\n"
           f" {len(r):5d}                  Number of points in mesh\n"
           "    1    0             Number of Wavefunctions, Number of Projectors\n"
           " Wavefunctions         nl  l   occ\n                       1S  0  1.00\n</PP_HEADER>\n"
           f"<PP_MESH>\n  <PP_R>\n{col(r)}\n  </PP_R>\n  <PP_RAB>\n{col([v * 0.0125 for v in r])}\n  </PP_RAB>\n</PP_MESH>\n"
           f"<PP_LOCAL>\n{col([-2.0 * math.erf(v / 0.5) / v for v in r])}\n</PP_LOCAL>\n"
           "<PP_NONLOCAL>\n</PP_NONLOCAL>\n"
           f"<PP_PSWFC>\n1S    0  1.00          Wavefunction\n{col([2 * v * math.exp(-v) for v in r])}\n</PP_PSWFC>\n"
           f"<PP_RHOATOM>\n{col([4.0 * v * v * math.exp(-2.0 * v) for v in r])}\n</PP_RHOATOM>\n")
    with open(os.path.join(d, "H.soft.UPF"), "w") as f:
        f.write(upf)
    with open(os.path.join(d, "h2.in"), "w") as f:
        f.write("&control\n  calculation = 'scf'\n  pseudo_dir = './'\n  outdir = './tmp'\n/\n"
                f"&system\n  ibrav = 1, celldm(1) = {celldm}, nat = 2, ntyp = 1, ecutwfc = {ecut}\n/\n"
                "&electrons\n/\nATOMIC_SPECIES\n H 1.0 H.soft.UPF\nATOMIC_POSITIONS bohr\n"
                " H 0.0 0.0 0.0\n H 1.4 0.0 0.0\nK_POINTS gamma\n")
    return os.path.join(d, "h2.in"), os.path.join(d, "H.soft.UPF")
