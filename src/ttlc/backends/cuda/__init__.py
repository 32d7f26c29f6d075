"""Back end "cuda": target cuda-tile's Tile IR compiled to a cubin and run with the CUDA driver
(docs/cuda-tile.md, "Running kernels")."""
