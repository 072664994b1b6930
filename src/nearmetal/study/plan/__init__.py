"""The study pipeline's planning stage: a validated study's cells, randomized blocks of runs
and the analysis' decisions (records.Cell, records.RunSpec, records.AnalysisSpec), and the
further blocks of adaptive repetitions. Imports nothing of execute/ or store/."""
