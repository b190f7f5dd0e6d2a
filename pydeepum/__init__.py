"""deepum: DeepUM-style correlation prefetching for CUDA Unified Memory.

The package drives the prefetch core (the same C sources as the kernel module
and libdeepum) for trace replay, and controls the kernel module.
"""

__version__ = "0.1.0"
