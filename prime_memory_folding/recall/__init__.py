"""Meaning: embedders and the store's embedding space, the ranking settings, and the
parts a text query's ranking fuses (:mod:`.fusion`)."""
