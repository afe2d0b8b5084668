"""Sweeps: job directories, run states (resume, failures), the sweep record, the SLURM launcher."""
