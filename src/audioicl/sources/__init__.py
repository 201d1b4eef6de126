"""Where a build's sounds come from: synthesized banks (default) and the original's public corpora."""
