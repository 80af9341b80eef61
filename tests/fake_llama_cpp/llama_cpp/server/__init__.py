"""The stand-in's ``llama_cpp.server`` package: ``python -m llama_cpp.server`` runs ``__main__.py``."""
