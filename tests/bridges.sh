#!/bin/sh
# bridges.sh - import of Hugging Face configs, --emit of launch files for each framework
# (JSON parsed back, argument and key names checked against each framework's real ones,
# kept as allow-lists below from docs/ECOSYSTEM.md 3.1-3.5), and `mpplan compare`.
. "$top_srcdir/tests/tap.sh"
MPPLAN=${MPPLAN:-./mpplan}
hf="$top_srcdir/tests/data/hf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status_is () { want=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err"; [ $? -eq "$want" ]; }
err_has () { pat=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err"; grep -q -- "$pat" "$tmp/err"; }
out_has () { pat=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err" && grep -Eq -- "$pat" "$tmp/out"; }

# Every "--flag" in FILE (or every key in the given section of FILE) is in ALLOWED.
only_flags () {
  allowed=$1; file=$2
  for f in $(grep -Eo -- '(^| )--[a-z0-9_-]+' "$file" | tr -d ' ' | sort -u); do
    echo " $allowed " | grep -q " $f " || { echo "# $file: $f is not a real flag" >&2; return 1; }
  done
}
only_keys () {
  allowed=$1; file=$2
  for k in $(grep -Eo '^[a-z_0-9]+ =' "$file" | tr -d ' =' | sort -u); do
    echo " $allowed " | grep -q " $k " || { echo "# $file: $k is not a real key" >&2; return 1; }
  done
}
json_keys_ok () {
  allowed=$1; file=$2
  json-glib-validate "$file" >/dev/null || return 1
  for k in $(grep -Eo '"[a-z_0-9]+" :' "$file" | tr -d '" :' | sort -u); do
    echo " $allowed " | grep -q " $k " || { echo "# $file: $k is not a real key" >&2; return 1; }
  done
}

# Megatron-LM (megatron/training/arguments.py) and torchrun (elastic/run.html).
MEGATRON="--tensor-model-parallel-size --pipeline-model-parallel-size \
--num-layers-per-virtual-pipeline-stage --num-virtual-stages-per-pipeline-rank \
--decoder-first-pipeline-num-layers --decoder-last-pipeline-num-layers \
--pipeline-model-parallel-layout --sequence-parallel --context-parallel-size \
--expert-model-parallel-size --micro-batch-size --global-batch-size --recompute-granularity \
--recompute-method --recompute-num-layers --use-distributed-optimizer --overlap-grad-reduce \
--overlap-param-gather --num-layers --hidden-size --ffn-hidden-size --num-attention-heads \
--kv-channels --group-query-attention --num-query-groups --seq-length \
--max-position-embeddings --swiglu --normalization --position-embedding-type \
--untie-embeddings-and-output-weights --disable-bias-linear --num-experts --moe-router-topk \
--moe-ffn-hidden-size --bf16 --fp16"
TORCHRUN="--nnodes --nproc-per-node --node-rank --rdzv-backend --rdzv-endpoint --rdzv-id \
--standalone --master-addr --master-port"
# DeepSpeed (docs/config-json) and its launcher (deepspeed/launcher/runner.py).
DS_KEYS="train_batch_size train_micro_batch_size_per_gpu gradient_accumulation_steps \
zero_optimization stage overlap_comm contiguous_gradients reduce_bucket_size bf16 fp16 enabled \
pipeline stages partition activation_checkpoint_interval activation_checkpointing \
partition_activations contiguous_memory_optimization gradient_clipping steps_per_print"
DS_FLAGS="--num_nodes --num_gpus --hostfile --include --exclude --master_addr --master_port \
--deepspeed --deepspeed_config"
# torchtitan (job_config.py before PR #2386) and Horovod (horovod/runner/launch.py).
TITAN_KEYS="data_parallel_replicate_degree data_parallel_shard_degree fsdp_reshard_after_forward \
tensor_parallel_degree pipeline_parallel_degree pipeline_parallel_schedule \
pipeline_parallel_microbatch_size context_parallel_degree expert_parallel_degree \
local_batch_size global_batch_size seq_len mode"
HOROVOD="--fusion-threshold-mb --cycle-time-ms --hierarchical-allreduce --hierarchical-allgather"
TF_KEYS="cluster worker task type index"

# ---- import ------------------------------------------------------------------------------
ok "import hf gpt2 prints a model YAML" out_has '^layers: 12$' "$MPPLAN" import hf "$hf/gpt2.json"
ok "import hf -o writes a file that validates" sh -c "\"$MPPLAN\" import hf \"$hf/llama-3-8b.json\" -o \"$tmp/l.yaml\" && \"$MPPLAN\" validate \"$tmp/l.yaml\" >/dev/null"
ok "the imported YAML describes as 8.03B" out_has '8\.030?B' "$MPPLAN" describe "$tmp/l.yaml"
ok "describe reads a config.json directly" out_has '46\.7' "$MPPLAN" describe "$hf/mixtral-8x7b.json"
ok "what the IR cannot cost is refused by name (exit 2)" status_is 2 "$MPPLAN" import hf "$hf/deepseek-v3-like.json"
ok "the refusal names the key" err_has 'unsupported feature: shared experts (n_shared_experts)' "$MPPLAN" import hf "$hf/deepseek-v3-like.json"
ok "Gemma 2 imports with its window pattern" sh -c "\"$MPPLAN\" import hf \"$hf/gemma-2-9b.json\" -o \"$tmp/g.yaml\" && grep -qx '  pattern: \\[window, full\\]' \"$tmp/g.yaml\" && \"$MPPLAN\" validate \"$tmp/g.yaml\" >/dev/null"
ok "Gemma 3's vision tower is noted on stderr" err_has 'vision tower' "$MPPLAN" import hf "$hf/gemma-3-27b.json"
printf '{"model_type": "llama",' > "$tmp/bad.json"
ok "bad JSON is bad input (2)" status_is 2 "$MPPLAN" import hf "$tmp/bad.json"
ok "import without a format is a usage error" status_is 2 "$MPPLAN" import "$hf/gpt2.json"
ok "a sliding window is kept as a window" out_has '^  window: 4096$' "$MPPLAN" import hf "$hf/mistral-7b.json"
ok "plan -m config.json plans it" out_has '^Recommended' "$MPPLAN" plan -q -m "$hf/llama-3-8b.json" -c dgx-a100-80g:2

# ---- emit --------------------------------------------------------------------------------
plan () { "$MPPLAN" plan -q "$@" >"$tmp/out" 2>"$tmp/err"; }
ok "--emit megatron writes args and cmd.sh" plan -m gpt3-175b -c dgx-a100-80g:128 --emit megatron -o "$tmp/mg"
ok "megatron flags are Megatron-LM's and torchrun's" only_flags "$MEGATRON $TORCHRUN" "$tmp/mg/megatron_args.txt"
ok "megatron cmd.sh launches with torchrun --nnodes 128 --nproc-per-node 8" grep -q 'torchrun --nnodes 128 --nproc-per-node 8' "$tmp/mg/cmd.sh"
ok "megatron args carry tp, pp, vpp and sp" sh -c "grep -qx -- '--tensor-model-parallel-size 4' \"$tmp/mg/megatron_args.txt\" && grep -q -- '--sequence-parallel' \"$tmp/mg/megatron_args.txt\" && grep -Eq -- '--(num-layers-per-virtual-pipeline-stage|pipeline-model-parallel-layout)' \"$tmp/mg/megatron_args.txt\""
ok "GQA and RMSNorm flags for Llama 3" sh -c "\"$MPPLAN\" plan -q -m \"$hf/llama-3-8b.json\" -c dgx-a100-80g:2 --emit megatron -o \"$tmp/ml\" 2>/dev/null >/dev/null && grep -qx -- '--num-query-groups 8' \"$tmp/ml/megatron_args.txt\" && grep -qx -- '--normalization RMSNorm' \"$tmp/ml/megatron_args.txt\""
ok "llama megatron flags are real" only_flags "$MEGATRON $TORCHRUN" "$tmp/ml/megatron_args.txt"

ok "--emit deepspeed" plan -m gpt3-13b -c dgx-a100-80g:4 --emit deepspeed -o "$tmp/ds"
ok "ds_config.json parses and has only DeepSpeed keys" json_keys_ok "$DS_KEYS" "$tmp/ds/ds_config.json"
ok "the DeepSpeed batch triple multiplies out" sh -c "tb=\$(grep -Eo '\"train_batch_size\" : [0-9]+' \"$tmp/ds/ds_config.json\" | grep -Eo '[0-9]+\$'); mb=\$(grep -Eo '\"train_micro_batch_size_per_gpu\" : [0-9]+' \"$tmp/ds/ds_config.json\" | grep -Eo '[0-9]+\$'); ga=\$(grep -Eo '\"gradient_accumulation_steps\" : [0-9]+' \"$tmp/ds/ds_config.json\" | grep -Eo '[0-9]+\$'); [ \$((tb % (mb * ga))) -eq 0 ]"
ok "deepspeed cmd.sh flags are the launcher's" only_flags "$DS_FLAGS" "$tmp/ds/cmd.sh"

ok "--emit torchrun" plan -m gpt3-1.3b -c dgx-a100-80g:2 --emit torchrun -o "$tmp/tr"
ok "torchrun snippet has init_device_mesh" grep -q 'init_device_mesh("cuda"' "$tmp/tr/parallel.py"
ok "torchrun cmd.sh flags are torchrun's" only_flags "$TORCHRUN" "$tmp/tr/cmd.sh"
if command -v python3 >/dev/null; then
  ok "parallel.py is valid Python" python3 -c "import ast,sys; ast.parse(open(sys.argv[1]).read())" "$tmp/tr/parallel.py"
fi

ok "--emit torchtitan" plan -m llama3-8b -c dgx-a100-80g:4 --emit torchtitan -o "$tmp/tt"
ok "torchtitan TOML keys are torchtitan's" only_keys "$TITAN_KEYS" "$tmp/tt/train.toml"
if command -v python3 >/dev/null && python3 -c 'import tomllib' 2>/dev/null; then
  ok "train.toml parses" python3 -c "import tomllib,sys; tomllib.load(open(sys.argv[1],'rb'))" "$tmp/tt/train.toml"
fi
ok "torchtitan cmd.sh notes the current CLI overrides" grep -q -- '--parallelism.tensor_parallel_degree' "$tmp/tt/cmd.sh"

ok "--emit horovod of a tp plan exits 0" plan -m gpt3-1.3b -c dgx-a100-80g:4 --fix tp=2 --emit horovod -o "$tmp/hv"
ok "... says Horovod has no tensor parallelism and what it emits" grep -q 'Horovod has no tensor parallelism; best plan Horovod can run: dp=32 tp=1' "$tmp/err"
ok "horovodrun flags are Horovod's" only_flags "$HOROVOD" "$tmp/hv/cmd.sh"
ok "horovodrun -np 32 with hierarchical all-reduce" grep -q 'horovodrun -np 32 -H .* --hierarchical-allreduce' "$tmp/hv/cmd.sh"

ok "--emit tensorflow on 2 nodes" plan -m gpt3-125m -c dgx-a100-80g:2 --emit tensorflow -o "$tmp/tf"
ok "tf_config.json parses, one TF_CONFIG per worker" sh -c "json_keys_ok() { :; }; json-glib-validate \"$tmp/tf/tf_config.json\" >/dev/null && [ \$(grep -c '\"index\"' \"$tmp/tf/tf_config.json\") -eq 2 ]"
ok "tf_config.json has only TF_CONFIG keys" json_keys_ok "$TF_KEYS" "$tmp/tf/tf_config.json"
ok "MultiWorkerMirroredStrategy across nodes" grep -q 'MultiWorkerMirroredStrategy' "$tmp/tf/strategy.py"
ok "--emit tensorflow on one node uses MirroredStrategy" sh -c "\"$MPPLAN\" plan -q -m mlp-1024 -c dgx-a100-80g:1 --emit tensorflow -o \"$tmp/tf1\" >/dev/null 2>&1 && grep -q 'MirroredStrategy()' \"$tmp/tf1/strategy.py\" && [ ! -e \"$tmp/tf1/tf_config.json\" ]"

ok "--emit mxnet" plan -m gpt3-1.3b -c dgx-a100-80g:1 -b 128 --fix pp=2,num_micro_batches=1,tp=1 --emit mxnet -o "$tmp/mx"
ok "mxnet places layers in ctx groups" grep -q '"block.0": "stage0"' "$tmp/mx/mxnet_setup.py"
ok "mxnet kvstore is 'device' on one node" grep -q 'KVSTORE = "device"' "$tmp/mx/mxnet_setup.py"

ok "--emit of an unknown framework is a usage error" status_is 2 "$MPPLAN" plan -q -m mlp-1024 -c dgx-a100-80g:1 --emit caffe
ok "no temporary files are left behind" sh -c "! ls -a \"$tmp\"/*/ | grep -q '\\.tmp\\|~\$'"

# ---- compare -----------------------------------------------------------------------------
ok "compare mlp-1024 prints a row per strategy" sh -c "\"$MPPLAN\" compare -m mlp-1024 -c workstation-pcie4 > \"$tmp/c1\" && [ \$(grep -Ec '^(PyTorch DDP|PyTorch FSDP|TensorFlow MirroredStrategy|Horovod|MXNet layer placement|Megatron-LM 3D|DeepSpeed ZeRO|mpplan)' \"$tmp/c1\") -eq 8 ]"
ok "compare gpt3-175b: DDP does not fit, Megatron-LM 3D does" sh -c "\"$MPPLAN\" compare -m gpt3-175b -c dgx-a100-80g:128 > \"$tmp/c2\" && grep -Eq '^PyTorch DDP .* no ' \"$tmp/c2\" && grep -Eq '^Megatron-LM 3D .* yes ' \"$tmp/c2\""
ok "compare --json parses" sh -c "\"$MPPLAN\" compare -m mlp-1024 -c dgx-a100-80g:1 --json > \"$tmp/c.json\" && json-glib-validate \"$tmp/c.json\" >/dev/null && [ \$(grep -c '\"strategy\"' \"$tmp/c.json\") -eq 8 ]"
ok "compare without --cluster is a usage error" status_is 2 "$MPPLAN" compare -m mlp-1024
tap_done
