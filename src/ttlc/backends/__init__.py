"""Code generators, one package per target (``ttlc.backends.cpu``, ...).

Backends import their heavy dependencies (llvmlite, ...) themselves, so importing
``ttlc`` or running the front end never loads them.
"""
