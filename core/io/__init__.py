"""Samples in and out: dataset files and readers, record limits, writers and the output folder, reading outputs back."""
