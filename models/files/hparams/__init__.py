"""hparams."""
