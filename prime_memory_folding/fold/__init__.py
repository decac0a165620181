"""Folding: decay, tiers, the plan of a fold, and the near-duplicates it merges."""
