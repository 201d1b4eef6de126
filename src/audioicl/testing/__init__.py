"""Random-weight checkpoints of the model families for tests and GPU measurements."""
