"""nearmetal: MPI applications in containers vs bare metal, measured honestly."""

__version__ = "0.1.0"
