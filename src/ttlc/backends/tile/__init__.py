"""Back end "cuda-tile": NVIDIA's CUDA Tile IR, as MLIR text and as bytecode.

``ops`` is the table of Tile IR operations and types that ``text`` (the printer) and
``bytecode`` (the Binary Format writer) both read; ``tir`` the module model;
``translate`` (with the rules of ``scalar``, ``blas`` and ``spmd``) turns ttlc IR into a
module; ``backend`` implements the registry entry (``ttlc.backends``).  No third-party package is needed to
emit; NVIDIA's ``tileiras`` validates the output in the tests.
"""
