"""Fixtures: synthetic run and experiment directories (report_synthetic.py builds them)."""

from report_synthetic import evil_run, rate_experiment, users_experiments

__all__ = ["evil_run", "rate_experiment", "users_experiments"]
