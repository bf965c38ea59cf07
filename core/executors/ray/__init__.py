"""The Ray engine: the same chain as Ray Data stages."""
