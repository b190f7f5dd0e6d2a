# call 6 (nineteenth session): the GPU tests of the engine and of libdeepum under training, at this tree's HEAD
. out/prep.sh
timeout 500 python3 -m pytest -m gpu tests/gpu -v -p no:cacheprovider -k "engine or unchanged" 2>&1 | tail -25
# call 7: the rest of them
#   . out/prep.sh; timeout 280 python3 -m pytest -m gpu tests/gpu -v -p no:cacheprovider -k "tracer or per_launch"
