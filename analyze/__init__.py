"""`djx analyze`: what a finished run kept, dropped and rejected, and where its thresholds sit."""
from djx.analyze.analysis import Analysis, analyze, default_out_dir

__all__ = ["Analysis", "analyze", "default_out_dir"]
