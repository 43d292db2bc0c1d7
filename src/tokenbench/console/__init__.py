"""What prints while a command runs: the live view, the summary tables, numbers as text, the wide console."""
