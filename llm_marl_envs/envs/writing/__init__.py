"""Collaborative writing: agents with distinct roles summarise or introduce a source text together."""
