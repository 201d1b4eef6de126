"""``audioicl study``: conditions, the grid run with one backend, and its report."""
