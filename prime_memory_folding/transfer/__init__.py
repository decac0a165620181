"""Memories in and out of a store: packs, and imports from other tools' files and folders."""
