"""Mappers: transform samples."""
