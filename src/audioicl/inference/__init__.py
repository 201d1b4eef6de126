"""Inference: running a backend over a dataset: options, the run record, the runner, the results log, Ray."""
