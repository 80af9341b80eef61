"""Hydra configs of genenv-train (shipped as package data)."""
