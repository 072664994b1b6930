"""Every list of choices a user can name, asked of its registry when needed (never copied):
argparse and study and I/O study validation read them from here (the fast `run` parser
asks the registries themselves: one module less on its hot path), so a backend registered
by one module is a choice everywhere."""


def modes():
    from .models import names

    return names()


def runtimes():
    from .runtimes import names

    return names()


def mpis():
    from .families import names

    return names()


def schedulers():
    from .schedulers import names

    return names()


def io_libraries():
    from .io.libraries import names

    return names()


def image_formats():
    from .image.formats import names

    return names()


def report_formats():
    from .report.formats import names

    return names()


def distros():
    from .image.recipe import DISTROS

    return DISTROS


def networks():
    from .networks import names

    return names()
