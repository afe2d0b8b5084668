"""ROAR and recursive ROAR (``conf/roar/``): a run whose data has each instance's most important tokens masked
by another run's model, trained from scratch (Hooker et al. 2019; Madsen et al. 2022). ``masking.py`` chooses
and applies the masks; ``job.py`` finds the source run, checks it and computes (or reads back) the run's masks.
"""
