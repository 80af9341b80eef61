"""A stand-in for the ``llama_cpp`` package, put first on ``PYTHONPATH`` by the tests that need a server which
fails the way a broken llama.cpp build does (see ``llama_cpp/server/__main__.py``)."""
