"""Host discovery: MPI installations, CPU, environment hazards. Results are cached on disk."""
