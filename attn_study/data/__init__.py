"""Datasets: canonical-format readers, text normalisation, vocabulary, embeddings, the DataModule."""
