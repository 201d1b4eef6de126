"""The dataset on disk: meta files, manifest, build, card, validation, download, the transcript sidecar."""
