"""Data-Juicer's deduplicators: exact text and image hashes, MinHash LSH and SimHash near-duplicates."""
