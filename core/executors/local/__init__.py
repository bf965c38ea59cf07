"""The local engine: worker processes on this machine fed through pipes."""
