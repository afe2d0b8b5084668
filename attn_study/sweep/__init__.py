"""Sweeps: job directory names, run states (skip, resume, failures), the sweep record (sweep.json).
The SLURM launcher is a Hydra plugin: hydra_plugins/attn_study_launcher."""
