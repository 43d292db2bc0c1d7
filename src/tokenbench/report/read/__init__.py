"""The report's inputs: run and experiment directories read into rows (ReportData), through rundir.read."""
