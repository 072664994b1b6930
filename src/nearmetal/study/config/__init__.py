"""The study pipeline's first stage: a study file read with limits and validated (pydantic),
every problem one line naming the file and the key path. Imports nothing of the later
stages (plan/, execute/, store/); what planning would refuse is checked by plan/study_file.py."""
