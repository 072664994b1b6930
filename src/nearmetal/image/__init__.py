"""Container images: a Debian rootfs with one or more MPI families and the nearmetal kernels.

Layout under home()/images:

    NAME/rootfs/              the directory image (always present)
    NAME/image.json           what the image is (inspect.metadata); also at rootfs/opt/nearmetal/image.json
    NAME/NAME.sqfs            with --format squashfs
    NAME.build.log            full log of the last build
    (a runtime's storage)     formats kept by a runtime itself (formats/<name>.py)

Modules: recipe (distros, packages from the MPI family profiles, the digest), builder
(debootstrap + chroot build, locks), generic (the --generic variant: the MPIs' shared-memory
transports left out), chroot (build commands and their mounts), progress
(what a build shows), inspect (image.json from a rootfs, through elf.py), store (the
images directory, resolving a name or path to an Image), formats/ (one module per format).
"""

from .formats import FORMATS
from .recipe import DISTROS, MOUNT_POINTS, default_name, host_distro, mirror
from .store import IN_IMAGE_JSON, Image, ImageRef, images_dir, list_images, resolve


def build(distro=None, mpis=None, fmt="dir", name=None, progress=True, packages=None, recipe=None,
          source=None, generic=None, portable_kernels=None) -> Image:
    """builder.build: build (or reuse) an image; imported on first use, since resolving an
    image sits on every `nearmetal run` and building does not."""
    from .builder import build as build_image

    return build_image(distro=distro, mpis=mpis, fmt=fmt, name=name, progress=progress, packages=packages,
                       recipe=recipe, source=source, generic=generic, portable_kernels=portable_kernels)


__all__ = ["DISTROS", "FORMATS", "IN_IMAGE_JSON", "MOUNT_POINTS", "Image", "ImageRef", "build", "default_name", "host_distro",
           "images_dir", "list_images", "mirror", "resolve"]
