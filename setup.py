# setup.py exists only for cffi_modules (cffi's documented integration).
from setuptools import setup

setup(cffi_modules=["pydeepum/_ffi_build.py:ffibuilder"])
