"""Models: encoders, attention scoring, projections, the staged classifier, the LightningModule."""
