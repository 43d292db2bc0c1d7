"""Leaves every part may use: child processes, redaction, durations, slugs, the frozen base model."""
