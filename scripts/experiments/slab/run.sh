#!/bin/bash
# On the device: compile DIR's variants with main.cu and run the A/B.
set -e
d=$1; here=$(dirname "$0")
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90 "-DVARIANTS(X)=$(cat $d/variants)" -Xptxas -v $here/main.cu $d/*.cu -lcuda -o $d/ab 2>&1 | grep -E "registers|error" || true
$d/ab ${2:-256}
