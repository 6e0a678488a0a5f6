cd sample_programs/corpus
for c in "torch_t5_encoder.py" "torch_t5_encoder.py --sdpa" "torch_beam_search.py" "torch_beam_search.py --prefix-reorder" "torch_mdn_train.py" "triton_moe_grouped.py" "triton_moe_grouped.py --grouped" "cupy_pic2d.py" "cupy_pic2d.py --fused" "cuda_smith_waterman.py" "cuda_smith_waterman.py --shared-subst"; do
  echo "=== $c"
  timeout 100 python3 $c --time 20 2>&1 | tail -4
  timeout 120 /opt/nvidia/nsight-compute/2025.3.1/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv python3 $c > $OUT/$(echo $c | tr ' ' '_').csv 2>&1
  echo "launches: $(grep -c '"gpu__time_duration.sum"' $OUT/$(echo $c | tr ' ' '_').csv)"
done
