"""Developer tools: synthetic data and tiny test models for offline tests."""
