"""The `nearmetal` command line.

argparse (standard library) rather than click: `nearmetal run` sits in front of every MPI
launch and must add only milliseconds, and argparse imports in a fraction of click's time.
Heavy modules (rich, pyelftools) are imported only by the subcommands that need them.
"""

import argparse
import os
import sys

from .errors import NearmetalError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, no usage dump: the user sees what was wrong and where to look.
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _env_pair(text):
    key, sep, value = text.partition("=")
    if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
        raise argparse.ArgumentTypeError(f"expected K=V with a variable name K, got '{text}'")
    return key, value


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _csv(choices):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [i for i in items if i not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"unknown value '{','.join(bad) or text}' (choose from: {', '.join(choices)})")
        return items
    return parse


MODES = ("native", "hybrid", "bind")
RUNTIMES = ("charliecloud", "bwrap", "podman")
MPIS = ("openmpi", "mpich")


def build_parser():
    p = _Parser(prog="nearmetal", description="Does my MPI application run as fast in a container as on bare metal?")
    p.add_argument("--version", action="version", version=f"nearmetal {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    d = sub.add_parser("doctor", help="report MPI installations, container runtimes, CPU, hazards")
    d.add_argument("--image", help="also inspect an image (name or path)")
    d.add_argument("--program", action="append", default=[], help="program inside the image to inspect (repeatable)")
    d.add_argument("--json", action="store_true", help="machine-readable output (see docs/doctor-json.md)")

    im = sub.add_parser("image", help="build and list container images")
    isub = im.add_subparsers(dest="image_command", metavar="ACTION", parser_class=_Parser)
    isub.required = True
    b = isub.add_parser("build", help="build a Debian image with MPI and nearmetal's kernels")
    b.add_argument("--distro", choices=("bookworm", "trixie", "bullseye"), help="Debian release (default: the host's)")
    b.add_argument("--mpi", type=_csv(MPIS), default=list(MPIS), help="MPI families to install, comma-separated (default: openmpi,mpich)")
    b.add_argument("--format", choices=("dir", "squashfs", "podman"), default="dir", help="dir (always), plus a .sqfs or a podman image")
    b.add_argument("--name", help="image name (default: nm-DISTRO-MPIS)")
    isub.add_parser("list", help="list built images")

    r = sub.add_parser("run", help="launch an MPI program natively or in a container")
    r.add_argument("--mode", choices=MODES, default="native", help="MPI model (default: native)")
    r.add_argument("--runtime", choices=RUNTIMES, default="charliecloud", help="container runtime (default: charliecloud)")
    r.add_argument("--image", help="image name, directory, or .sqfs (default: the host distro's default image)")
    r.add_argument("--mpi", choices=MPIS, help="host MPI family (default: what the program was built with)")
    r.add_argument("-n", dest="ranks", type=_positive, default=2, help="number of ranks (default: 2)")
    r.add_argument("--ranks-per-node", type=_positive, help="ranks per node")
    r.add_argument("--threads", type=_positive, default=1, help="OpenMP threads per rank")
    r.add_argument("--env", action="append", type=_env_pair, default=[], metavar="K=V", help="environment for the ranks (repeatable)")
    r.add_argument("--dry-run", action="store_true", help="print the argv and environment, run nothing")
    r.add_argument("-v", "--verbose", action="store_true", help="print the argv and environment before running")
    r.add_argument("program_argv", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")

    k = sub.add_parser("kernels", help="build nearmetal's C kernels on the host")
    ksub = k.add_subparsers(dest="kernels_command", metavar="ACTION", parser_class=_Parser)
    ksub.required = True
    kb = ksub.add_parser("build", help="build the kernels for each host MPI")
    kb.add_argument("--mpi", type=_csv(MPIS), help="MPI families (default: all found)")
    return p


def _version():
    from . import __version__

    return __version__


def cmd_run(args):
    from .run import RunRequest, execute, plan

    command = args.program_argv
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise NearmetalError("no program given: nearmetal run [OPTIONS] -- PROGRAM [ARGS...]")
    req = RunRequest(command[0], command[1:], mode=args.mode, runtime=args.runtime, image=args.image,
                     mpi=args.mpi, ranks=args.ranks, ranks_per_node=args.ranks_per_node,
                     threads=args.threads, env=dict(args.env))
    p = plan(req)
    if args.dry_run:
        print(p.describe())
        return 0
    execute(p, verbose=args.verbose)
    return 0  # not reached: execute replaces the process


def cmd_doctor(args):
    from . import doctor

    if args.program and not args.image:
        raise NearmetalError("--program needs --image")
    report = doctor.collect(image=args.image, programs=args.program)
    if args.json:
        import json

        print(json.dumps(report, indent=2))
    else:
        from rich.console import Console

        doctor.render(report, Console())
    return 0


def cmd_image(args):
    from . import image

    if args.image_command == "build":
        img = image.build(distro=args.distro, mpis=tuple(args.mpi), fmt=args.format, name=args.name)
        print(f"image {img.name}: {img.rootfs}" + (f" (+ {img.sqfs})" if img.sqfs else "")
              + (f" (podman: {img.podman_ref})" if img.podman_ref else ""))
    else:
        for img in image.list_images():
            print(f"{img.name}\t{img.distro}\t{','.join(img.mpis)}\t{img.rootfs}")
    return 0


def cmd_kernels(args):
    from . import kernels
    from .discovery.mpi import discover

    for fam in args.mpi or list(discover()):
        print(f"{fam}: {kernels.build(fam)}")
    return 0


COMMANDS = {"run": cmd_run, "doctor": cmd_doctor, "image": cmd_image, "kernels": cmd_kernels}


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except NearmetalError as e:
        print(f"nearmetal {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"nearmetal {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
