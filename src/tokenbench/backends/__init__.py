"""Servers tokenbench can start itself. Today: the embedded llama.cpp server (xllamacpp)."""
