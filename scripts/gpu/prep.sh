# Sourced at the start of every device call (docs/STATUS.md, "Next on the H200"): the machine has
# no network, so pydeepum's wheels come from .whl/ (carried with the call), installed to /tmp/site;
# then the cffi extension and libdeepum are built for that machine.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
python3 pydeepum/_ffi_build.py >/dev/null 2>&1 || echo "ffi build failed"
make -C userlib -s || echo "userlib build failed"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
