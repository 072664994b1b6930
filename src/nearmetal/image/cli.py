"""`nearmetal image build|list`: what the command prints."""


def command(args):
    from .. import image

    if args.image_command == "build":
        img = image.build(distro=args.distro, mpis=tuple(args.mpi), fmt=args.format, name=args.name,
                          packages=args.packages, recipe=args.recipe, source=args.source,
                          generic=getattr(args, "generic", None),
                          portable_kernels=getattr(args, "portable_kernels", None))
        copies = [f"{f}: {v}" for f, v in _format_copies(img)]
        if img.meta.get("generic"):
            copies.append("generic: no shared-memory transport in its MPIs")
        if img.meta.get("kernels") == "portable":
            copies.append("kernels built for any x86-64 CPU")
        print(f"image {img.name}: {img.rootfs}" + (f" ({'; '.join(copies)})" if copies else ""))
    elif args.image_command == "import":
        from .importer import import_image, what_changed
        from .safe_extract import Limits

        img = import_image(args.source, args.name, fmt=args.format,
                           limits=Limits(max_files=args.max_files, max_bytes=args.max_size, keep_modes=args.keep_modes))
        left_out = img.meta["imported"].get("left_out_count", 0)
        mpis = ", ".join(f"{f} {m.get('version') or ''}".strip() for f, m in img.meta.get("mpi", {}).items()) or "no MPI"
        glibc = f"glibc {img.meta['glibc']}" if img.meta.get("glibc") else "no glibc found: only static programs run in it"
        said = [f"imported {img.meta['imported']['kind']}", img.meta.get("os"), mpis, glibc,
                f"{left_out} special file(s) left out" if left_out else None]
        print(f"image {img.name}: {img.rootfs} ({'; '.join(s for s in said if s)})")
        for line in what_changed(img.meta["imported"]):
            print(f"nearmetal: {line}")
    else:
        from ..families import names

        default = image.default_name(image.host_distro(), names())  # what run/bench use without --image
        for img in image.list_images():
            formats = ",".join(["dir"] + [f for f, _ in _format_copies(img)])
            extra = ",".join(img.meta.get("extra_packages") or {}) or "-"
            source = f"imported from {img.meta['imported']['from']}" if img.meta.get("imported") else "built"
            if img.meta.get("generic"):
                source += ", generic (no shared-memory transport)"
            if img.meta.get("kernels") == "portable":
                source += ", portable kernels (-march=x86-64)"
            if img.name == default:
                source += ", the default image (no --image)"
            print(f"{img.name}\t{img.distro}\t{','.join(img.mpis)}\t{formats}\t{extra}\t{img.rootfs}\t{source}")
    return 0


def _format_copies(img):
    """(format name, its copy) for each format an image has beside its directory."""
    from . import formats

    return [(name, img.location(name)) for name in formats.copies() if img.location(name)]
