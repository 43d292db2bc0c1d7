"""Experiments: a YAML file (or a preset) declares backends x server knobs x dataset variants x
load points x trials; the runner launches each server configuration once, runs its cells (one run
directory each), stops it, and aggregates trials. Resumable: finished cells are skipped."""
