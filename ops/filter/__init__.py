"""Filters: compute stats for a batch, keep or drop each sample from them."""
