"""Helpers shared by op families (one module per family)."""
