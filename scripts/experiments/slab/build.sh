#!/bin/bash
# build.sh DIR name=file.cu ... : copies each emitted kernel into DIR/name.cu, renamed k_name, with a
# run_name launcher; DIR/variants lists the names (main.cu's VARIANTS). Runs here (no GPU needed).
set -e
out=$1; shift; mkdir -p "$out"; : > "$out/variants"
for nf in "$@"; do
  n=${nf%%=*}; f=${nf#*=}
  sed -E -e "s/void __launch_bounds__\(FUSE_THREADS\) [a-z_0-9]+\(/void __launch_bounds__(FUSE_THREADS) k_$n(/" -e "s/fuse_(dynamic_smem_bytes|dot_path|oob)/fuse_\1_$n/g" "$f" > "$out/$n.cu"
  cat >> "$out/$n.cu" <<EOW
extern "C" void run_$n(const float* x, float* y, const float* w, const float* b, int stride, int n_rows, int n_cols, float eps, unsigned long long* err) {
  k_$n<<<(n_rows + ROWS - 1) / ROWS, FUSE_THREADS>>>(x, y, w, b, stride, n_rows, n_cols, eps, (long long)n_rows * stride, (long long)n_rows * stride, n_cols, n_cols, err);
}
EOW
  echo -n "X($n) " >> "$out/variants"
done
