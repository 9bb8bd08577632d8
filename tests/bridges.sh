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

# tests/bridges/check.py: every name against the framework's own (lists read from its
# source at a named version) and the plan carried over (world size, batch, vpp, recompute,
# ZeRO). python3 is a build dependency (scripts/deps.sh).
bridges="$top_srcdir/tests/bridges"
check () { python3 "$bridges/check.py" "$1" "$2" "$bridges" >&2; }

# ---- import ------------------------------------------------------------------------------
ok "import hf gpt2 prints a model YAML" out_has '^layers: 12$' "$MPPLAN" import hf "$hf/gpt2.json"
ok "import hf -o writes a file that validates" sh -c "\"$MPPLAN\" import hf \"$hf/llama-3-8b.json\" -o \"$tmp/l.yaml\" && \"$MPPLAN\" validate \"$tmp/l.yaml\" >/dev/null"
ok "the imported YAML describes as 8.03B" out_has '8\.030?B' "$MPPLAN" describe "$tmp/l.yaml"
ok "describe reads a config.json directly" out_has '46\.7' "$MPPLAN" describe "$hf/mixtral-8x7b.json"
ok "DeepSeek-V3's MLA and shared experts import" out_has '^shared_experts: 1$' "$MPPLAN" import hf "$hf/deepseek-v3-like.json"
printf '{"model_type": "qwen3_moe", "mlp_only_layers": [0, 1]}' > "$tmp/mlponly.json"
ok "what the IR cannot cost is refused by name (exit 2)" status_is 2 "$MPPLAN" import hf "$tmp/mlponly.json"
ok "the refusal names the key" err_has 'mlp_only_layers' "$MPPLAN" import hf "$tmp/mlponly.json"
ok "Gemma 2 at its 8192 context imports with its window pattern" sh -c "\"$MPPLAN\" import hf --seq-len 8192 \"$hf/gemma-2-9b.json\" -o \"$tmp/g.yaml\" && grep -qx '  pattern: \\[window, full\\]' \"$tmp/g.yaml\" && \"$MPPLAN\" validate \"$tmp/g.yaml\" >/dev/null"
ok "Gemma 3's vision tower is noted on stderr" err_has 'vision tower' "$MPPLAN" import hf "$hf/gemma-3-27b.json"
printf '{"model_type": "llama",' > "$tmp/bad.json"
ok "bad JSON is bad input (2)" status_is 2 "$MPPLAN" import hf "$tmp/bad.json"
ok "import without a format is a usage error" status_is 2 "$MPPLAN" import "$hf/gpt2.json"
ok "a sliding window is kept as a window" out_has '^  window: 4096$' "$MPPLAN" import hf --seq-len 8192 "$hf/mistral-7b.json"
ok "import sets a training length, not the 8192 context (a note says so)" sh -c "\"$MPPLAN\" import hf \"$hf/llama-3-8b.json\" 2>\"$tmp/e\" | grep -qx 'seq_len: 4096' && grep -q 'training length 4096 tokens of the 8192-token context' \"$tmp/e\""
ok "import --seq-len and --tokens-per-batch set seq_len and the batch" sh -c "\"$MPPLAN\" import hf --seq-len 2048 --tokens-per-batch 4194304 \"$hf/llama-3-8b.json\" 2>/dev/null > \"$tmp/lb.yaml\" && grep -qx 'seq_len: 2048' \"$tmp/lb.yaml\" && grep -qx '  global_batch: 2048' \"$tmp/lb.yaml\""
ok "import --tokens-per-batch below one sequence is a usage error" status_is 2 "$MPPLAN" import hf --seq-len 4096 --tokens-per-batch 100 "$hf/llama-3-8b.json"
ok "import of Falcon notes its parallel blocks" err_has "Falcon's blocks are parallel" "$MPPLAN" import hf "$hf/falcon-7b.json"
ok "plan -m config.json plans it" out_has '^Recommended' "$MPPLAN" plan -q -m "$hf/llama-3-8b.json" -c dgx-a100-80g:2

# ---- emit --------------------------------------------------------------------------------
plan () { "$MPPLAN" plan -q "$@" >"$tmp/out" 2>"$tmp/err"; }
ok "--emit megatron writes args and cmd.sh" plan -m gpt3-175b -c dgx-a100-80g:128 --emit megatron -o "$tmp/mg"
ok "megatron export passes check.py (Megatron-LM core_v0.15.3 arguments, torchrun, plan)" check megatron "$tmp/mg"
ok "megatron cmd.sh launches with torchrun --nnodes 128 --nproc-per-node 8" grep -q 'torchrun --nnodes 128 --nproc-per-node 8' "$tmp/mg/cmd.sh"
ok "megatron args carry tp, pp, vpp and sp" sh -c "grep -qx -- '--tensor-model-parallel-size 4' \"$tmp/mg/megatron_args.txt\" && grep -q -- '--sequence-parallel' \"$tmp/mg/megatron_args.txt\" && grep -Eq -- '--(num-layers-per-virtual-pipeline-stage|pipeline-model-parallel-layout)' \"$tmp/mg/megatron_args.txt\""
ok "GQA and RMSNorm flags for Llama 3" sh -c "\"$MPPLAN\" plan -q -m \"$hf/llama-3-8b.json\" -c dgx-a100-80g:2 --emit megatron -o \"$tmp/ml\" 2>/dev/null >/dev/null && grep -qx -- '--num-query-groups 8' \"$tmp/ml/megatron_args.txt\" && grep -qx -- '--normalization RMSNorm' \"$tmp/ml/megatron_args.txt\""
ok "Llama 3 carries its rotary base (--rotary-base 500000)" grep -qx -- '--rotary-base 500000' "$tmp/ml/megatron_args.txt"
ok "... and so does the zoo's llama3-8b" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-a100-80g:2 --emit megatron -o \"$tmp/mz\" >/dev/null 2>&1 && grep -qx -- '--rotary-base 500000' \"$tmp/mz/megatron_args.txt\""
ok "llama megatron export passes check.py" check megatron "$tmp/ml"
ok "megatron cmd.sh takes pretrain_gpt.py from MEGATRON_LM_DIR" grep -q '${MEGATRON_LM_DIR:?[^}]*}/pretrain_gpt.py' "$tmp/ml/cmd.sh"
ok "--emit megatron of an mlp exits 3" status_is 3 "$MPPLAN" plan -q -m mlp-1024 -c workstation-pcie4 --emit megatron -o "$tmp/mm"
ok "... naming Megatron-LM and why" grep -q '^mpplan: plan --emit megatron: Megatron-LM trains its own transformer models' "$tmp/err"
ok "... and writes nothing" test ! -e "$tmp/mm"

# The IR's attention, MoE and precision in Megatron-LM core_v0.15.3 arguments (each name,
# type and choice as its arguments.py declares it: check.py rebuilds that parser).
margs () { grep -Fqx -- "$1" "$2/megatron_args.txt"; }
python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c.update(num_hidden_layers=6, n_routed_experts=16); json.dump(c, open(sys.argv[2], 'w'))" "$hf/deepseek-v3.json" "$tmp/ds6.json"
ok "--emit megatron of DeepSeek-V3's shape (6 blocks, 16 experts)" plan -m "$tmp/ds6.json" -c dgx-h100:2 --emit megatron -o "$tmp/mds"
ok "... multi-head latent attention with its ranks and head widths" sh -c "grep -qx -- --multi-latent-attention "$tmp/mds/megatron_args.txt" && grep -qx -- '--q-lora-rank 1536' "$tmp/mds/megatron_args.txt" && grep -qx -- '--kv-lora-rank 512' "$tmp/mds/megatron_args.txt" && grep -qx -- '--qk-head-dim 128' "$tmp/mds/megatron_args.txt" && grep -qx -- '--qk-pos-emb-head-dim 64' "$tmp/mds/megatron_args.txt" && grep -qx -- '--v-head-dim 128' "$tmp/mds/megatron_args.txt" && ! grep -q -- --kv-channels "$tmp/mds/megatron_args.txt""
ok "... the experts' width, not the dense blocks' (--moe-ffn-hidden-size 2048)" margs '--moe-ffn-hidden-size 2048' "$tmp/mds"
ok "... the shared expert (--moe-shared-expert-intermediate-size 2048)" margs '--moe-shared-expert-intermediate-size 2048' "$tmp/mds"
ok "... the 3 dense first blocks (--moe-layer-freq ([0]*3+[1]*3))" margs '--moe-layer-freq ([0]*3+[1]*3)' "$tmp/mds"
ok "... the plan's dispatcher and grouped GEMMs" sh -c "grep -Eqx -- '--moe-token-dispatcher-type (alltoall|allgather)' "$tmp/mds/megatron_args.txt" && grep -qx -- --moe-grouped-gemm "$tmp/mds/megatron_args.txt""
ok "... and passes check.py" check megatron "$tmp/mds"
ok "tiny-moe: expert ffn 256 (not the dense 512), a shared expert, 1 dense block" sh -c "\"$MPPLAN\" plan -q -m tiny-moe -c dgx-a100-80g:1 --emit megatron -o \"$tmp/mtm\" >/dev/null 2>&1 && grep -qx -- '--moe-ffn-hidden-size 256' \"$tmp/mtm/megatron_args.txt\" && grep -qx -- '--moe-layer-freq (\[0\]\*1+\[1\]\*3)' \"$tmp/mtm/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mtm\" \"$bridges\""
sed 's/^experts_per_token: 2$/experts_per_token: 2\ncapacity_factor: 1.25/' "$top_srcdir/examples/models/tiny-moe.yaml" > "$tmp/tmc.yaml"
ok "a capacity factor is --moe-expert-capacity-factor (check.py)" sh -c "\"$MPPLAN\" plan -q -m \"$tmp/tmc.yaml\" -c dgx-a100-80g:1 --emit megatron -o \"$tmp/mtc\" >/dev/null 2>&1 && grep -qx -- '--moe-expert-capacity-factor 1.25' \"$tmp/mtc/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mtc\" \"$bridges\""
ok "--emit megatron of GPT-OSS-120B (config.json)" plan -m "$hf/gpt-oss-120b.json" -c dgx-h100:16 --fix tp=2,pp=8,ep=8,etp=1 --emit megatron -o "$tmp/mgo"
ok "... its 128-token window as TE's (127, 0) on every other block" sh -c "grep -qx -- '--window-size 127,0' \"$tmp/mgo/megatron_args.txt\" && grep -qx -- '--window-attn-skip-freq 2' \"$tmp/mgo/megatron_args.txt\" && grep -q 'window includes the query' \"$tmp/mgo/cmd.sh\""
ok "... its sinks as a learnable softmax offset" margs '--softmax-type learnable' "$tmp/mgo"
ok "... biases everywhere (no --disable-bias-linear), experts not tensor-split" sh -c "! grep -q -- --disable-bias-linear \"$tmp/mgo/megatron_args.txt\" && grep -qx -- '--expert-tensor-parallel-size 1' \"$tmp/mgo/megatron_args.txt\""
ok "... and passes check.py" check megatron "$tmp/mgo"
printf '{"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 4096, "sliding_window": 1024, "use_sliding_window": true, "max_window_layers": 1}' > "$tmp/qw.json"
ok "windows from max_window_layers on: a per-layer --window-attn-skip-freq list (check.py)" sh -c "\"$MPPLAN\" plan -q -m \"$tmp/qw.json\" -c dgx-a100-80g:1 --emit megatron -o \"$tmp/mqw\" >/dev/null 2>&1 && grep -qx -- '--window-attn-skip-freq \[0,1,1,1\]' \"$tmp/mqw/megatron_args.txt\" && grep -qx -- '--window-size 1023,0' \"$tmp/mqw/megatron_args.txt\" && grep -qx -- --add-qkv-bias \"$tmp/mqw/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mqw\" \"$bridges\""
ok "Qwen3-30B-A3B (config.json): --qk-layernorm and --kv-channels 128 (check.py)" sh -c "\"$MPPLAN\" plan -q -m \"$hf/qwen3-30b-a3b.json\" -c dgx-h100:4 --fix pp=1 --emit megatron -o \"$tmp/mq3\" >/dev/null 2>&1 && grep -qx -- --qk-layernorm \"$tmp/mq3/megatron_args.txt\" && grep -qx -- '--kv-channels 128' \"$tmp/mq3/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mq3\" \"$bridges\""
ok "Qwen1.5-MoE: q/k/v biases only (--disable-bias-linear --add-qkv-bias)" sh -c "\"$MPPLAN\" plan -q -m \"$hf/qwen1.5-moe-a2.7b.json\" -c dgx-h100:2 --emit megatron -o \"$tmp/mqm\" >/dev/null 2>&1 && grep -qx -- --disable-bias-linear \"$tmp/mqm/megatron_args.txt\" && grep -qx -- --add-qkv-bias \"$tmp/mqm/megatron_args.txt\" && grep -qx -- '--moe-shared-expert-intermediate-size 5632' \"$tmp/mqm/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mqm\" \"$bridges\""
ok "an fp8 plan: --fp8-format hybrid --fp8-recipe delayed (check.py)" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-h100:1 --fix fp8=true --emit megatron -o \"$tmp/mf8\" >/dev/null 2>&1 && grep -qx -- '--fp8-format hybrid' \"$tmp/mf8/megatron_args.txt\" && grep -qx -- '--fp8-recipe delayed' \"$tmp/mf8/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mf8\" \"$bridges\""
ok "... with layernorm recompute: per-tensor current scaling, which Megatron-Core allows" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-h100:1 --fix fp8=true,recompute=selective,recompute_modules=core_attn+layernorm --emit megatron -o \"$tmp/mf8r\" >/dev/null 2>&1 && grep -qx -- '--fp8-recipe tensorwise' \"$tmp/mf8r/megatron_args.txt\" && grep -qx -- '--recompute-modules core_attn layernorm' \"$tmp/mf8r/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mf8r\" \"$bridges\""
ok "check.py refuses delayed-scaling fp8 with layernorm recompute" sh -c "cp -r \"$tmp/mf8r\" \"$tmp/mf8x\" && sed -i 's/^--fp8-recipe tensorwise/--fp8-recipe delayed/' \"$tmp/mf8x/megatron_args.txt\" && ! python3 \"$bridges/check.py\" megatron \"$tmp/mf8x\" \"$bridges\" >/dev/null"
ok "check.py refuses a choice Megatron-LM's parser lacks" sh -c "cp -r \"$tmp/mf8\" \"$tmp/mf8y\" && sed -i 's/^--fp8-format hybrid/--fp8-format e5m2/' \"$tmp/mf8y/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mf8y\" \"$bridges\" | grep -q \"invalid choice: 'e5m2'\""
ok "full recompute of the first 2 blocks: --recompute-method block --recompute-num-layers 2" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-a100-80g:2 --fix pp=2,recompute=full,recompute_method=block,recompute_num_layers=2 --emit megatron -o \"$tmp/mrc\" >/dev/null 2>&1 && grep -qx -- '--recompute-method block' \"$tmp/mrc/megatron_args.txt\" && grep -qx -- '--recompute-num-layers 2' \"$tmp/mrc/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mrc\" \"$bridges\""
ok "405B on pp16 vpp8: the --account-for-* split, one layer per chunk (check.py)" sh -c "\"$MPPLAN\" plan -q -m llama3.1-405b -c dgx-h100:128 --fix tp=8,pp=16,vpp=8,cp=2,zero=1,micro_batch_size=1 --emit megatron -o \"$tmp/m405\" >/dev/null 2>&1 && grep -qx -- --account-for-embedding-in-pipeline-split \"$tmp/m405/megatron_args.txt\" && grep -qx -- --account-for-loss-in-pipeline-split \"$tmp/m405/megatron_args.txt\" && grep -qx -- '--num-layers-per-virtual-pipeline-stage 1' \"$tmp/m405/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/m405\" \"$bridges\""
ok "Gemma 3 --emit megatron exits 3, naming GeGLU" sh -c "\"$MPPLAN\" plan -q -m gemma3-27b -c dgx-h100:4 --emit megatron -o \"$tmp/mg3\" >/dev/null 2>\"$tmp/e\"; [ \$? -eq 3 ] && grep -q 'no GeGLU activation' \"$tmp/e\" && [ ! -e \"$tmp/mg3\" ]"
ok "MLA's up-projection recompute is Megatron-LM's --recompute-modules mla_up_proj (check.py)" sh -c "\"$MPPLAN\" plan -q -m tiny-mla -c dgx-h100:1 --fix recompute=selective,recompute_modules=mla_up_proj --emit megatron -o \"$tmp/mmla\" >/dev/null 2>&1 && grep -qx -- '--recompute-modules mla_up_proj' \"$tmp/mmla/megatron_args.txt\" && python3 \"$bridges/check.py\" megatron \"$tmp/mmla\" \"$bridges\""
ok "torchtitan's op-level selective recompute is refused by Megatron-LM by name" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-a100-80g:1 --fix recompute=selective,recompute_modules=op,zero=1 --emit megatron -o \"$tmp/mop\" 2>&1 >/dev/null | grep -q 'no op-level selective recompute'"

# torchtitan 0.3.0: fp8 through torchao's float8 converters, op-level SelectiveAC only.
ok "--emit torchtitan of an fp8 plan: Float8LinearConverter on the model config (check.py)" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-h100:1 --fix fp8=true --emit torchtitan -o \"$tmp/tf8\" >/dev/null 2>&1 && grep -q 'Float8LinearConverter.Config()' \"$tmp/tf8/mpplan_titan.py\" && python3 \"$bridges/check.py\" torchtitan \"$tmp/tf8\" \"$bridges\""
ok "... an fp8 MoE also converts the grouped expert GEMMs" sh -c "\"$MPPLAN\" plan -q -m qwen3-30b-a3b -c dgx-h100:2 --fix fp8=true,ep=8,tp=1 --emit torchtitan -o \"$tmp/tf8m\" >/dev/null 2>&1 && grep -q 'Float8GroupedExpertsConverter.Config()' \"$tmp/tf8m/mpplan_titan.py\" && python3 \"$bridges/check.py\" torchtitan \"$tmp/tf8m\" \"$bridges\""
ok "torchtitan refuses Megatron's core_attn selective recompute by name (zero pinned to one it runs)" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-a100-80g:1 --fix recompute=selective,zero=2 --emit torchtitan -o \"$tmp/tsr\" 2>&1 >/dev/null | grep -q \"torchtitan's selective activation checkpointing is op-level\""
ok "... and takes its own op-level one as SelectiveAC (check.py)" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-a100-80g:1 --fix recompute=selective,recompute_modules=op --emit torchtitan -o \"$tmp/tso\" >/dev/null 2>&1 && grep -q 'SelectiveAC.Config()' \"$tmp/tso/mpplan_titan.py\" && python3 \"$bridges/check.py\" torchtitan \"$tmp/tso\" \"$bridges\""
ok "torchtitan refuses tensor-split experts by name (zero pinned to one it runs)" sh -c "\"$MPPLAN\" plan -q -m qwen3-30b-a3b -c dgx-h100:2 --fix tp=2,ep=8,etp=2,zero=2 --emit torchtitan -o \"$tmp/tet\" 2>&1 >/dev/null | grep -q 'torchtitan does not tensor-split experts'"
ok "--emit deepspeed of an MoE plan says the experts' DeepSpeed-MoE layer (check.py)" sh -c "\"$MPPLAN\" plan -q -m mixtral-8x7b -c dgx-a100-80g:4 --fix ep=8 --emit deepspeed -o \"$tmp/dsm\" >/dev/null 2>&1 && grep -q 'deepspeed.moe.layer.MoE(.*num_experts=8, ep_size=8, k=2' \"$tmp/dsm/cmd.sh\" && python3 \"$bridges/check.py\" deepspeed \"$tmp/dsm\" \"$bridges\""
ok "... and an fp8 plan says where the FP8 GEMMs go (check.py)" sh -c "\"$MPPLAN\" plan -q -m gpt3-1.3b -c dgx-h100:1 --fix fp8=true --emit deepspeed -o \"$tmp/ds8\" >/dev/null 2>&1 && python3 \"$bridges/check.py\" deepspeed \"$tmp/ds8\" \"$bridges\""
ok "MXNet refuses an fp8 plan by name" sh -c "\"$MPPLAN\" plan -q -m gpt3-125m -c dgx-h100:1 --fix fp8=true,zero=0 --emit mxnet -o \"$tmp/mx8\" 2>&1 >/dev/null | grep -q 'MXNet 1.9 has no FP8 training'"

# --emit stack: the launch files of the plan's stack's framework (acc16b).
ok "--stack torchtitan --emit stack writes torchtitan's files (check.py)" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-h100:1 --stack torchtitan --fix zero=3 --emit stack -o \"$tmp/st\" >/dev/null 2>&1 && [ -e \"$tmp/st/mpplan_titan.py\" ] && python3 \"$bridges/check.py\" torchtitan \"$tmp/st\" \"$bridges\""
ok "... a megatron plan's are Megatron-LM's" sh -c "\"$MPPLAN\" plan -q -m gpt3-1.3b -c dgx-a100-80g:1 --emit stack -o \"$tmp/sm\" >/dev/null 2>&1 && [ -e \"$tmp/sm/megatron_args.txt\" ]"
ok "... and llm-foundry's, which mpplan does not write, exit 2 saying so" sh -c "\"$MPPLAN\" plan -q -m gpt3-1.3b -c dgx-a100-80g:1 --stack llm-foundry --emit stack -o \"$tmp/sl\" >/dev/null 2>\"$tmp/e\"; [ \$? -eq 2 ] && grep -q 'no launch files for the llm-foundry stack' \"$tmp/e\" && [ ! -e \"$tmp/sl\" ]"

ok "--emit deepspeed" plan -m gpt3-13b -c dgx-a100-80g:4 --emit deepspeed -o "$tmp/ds"
ok "deepspeed export passes check.py (DeepSpeed 0.19.8 keys and launcher)" check deepspeed "$tmp/ds"
ok "--emit deepspeed with full recompute at pp = 1" plan -m gpt3-13b -c dgx-a100-80g:4 --fix recompute=full,pp=1 --emit deepspeed -o "$tmp/dsr"
ok "... says the model must call deepspeed.checkpointing" grep -q 'nothing is$' "$tmp/dsr/cmd.sh"
ok "... and passes check.py" check deepspeed "$tmp/dsr"
ok "a pp4 ZeRO-1 pin refused for interleaving stays pp4 ZeRO-1 (1F1B)" plan -m gpt3-1.3b -c dgx-a100-80g:4 --fix pp=4,zero=1 --emit deepspeed -o "$tmp/dsp"
ok "... ds_config.json has 4 stages and ZeRO-1" sh -c "grep -q '\"stages\" : 4' \"$tmp/dsp/ds_config.json\" && grep -q '\"stage\" : 1' \"$tmp/dsp/ds_config.json\""
ok "... the message says it kept the pins" grep -q 'the best plan DeepSpeed can run within the --fix pins: dp=8 tp=1 pp=4 vpp=1 .* zero=1 .* schedule 1f1b' "$tmp/err"
ok "... and compares step times without an ambiguous ratio" sh -c "grep -q 'against .* for the best plan' \"$tmp/err\" && ! grep -q \"x the best plan's step\" \"$tmp/err\""

ok "--emit torchrun" plan -m gpt3-1.3b -c dgx-a100-80g:2 --emit torchrun -o "$tmp/tr"
ok "torchrun export passes check.py (Python, mesh, torchrun flags)" check torchrun "$tmp/tr"
ok "--emit torchrun of a cp = 2 plan" plan -m llama3-8b -c dgx-a100-80g:2 --fix cp=2 --emit torchrun -o "$tmp/trc"
ok "... reduces gradients over dp x cp and gives buffer_seq_dims (check.py)" check torchrun "$tmp/trc"
ok "... DDP/FSDP take the flattened dp x cp mesh" sh -c "grep -q '_flatten(\"dp_cp\")' \"$tmp/trc/parallel.py\" && ! grep -q 'mesh=mesh\[\"dp\"\]' \"$tmp/trc/parallel.py\""

ok "--emit torchtitan" plan -m llama3-8b -c dgx-a100-80g:4 --emit torchtitan -o "$tmp/tt"
ok "torchtitan export passes check.py (torchtitan 0.3.0 fields and CLI)" check torchtitan "$tmp/tt"
ok "torchtitan cmd.sh uses --module/--config, not the removed --job.config_file" sh -c "grep -q -- '-m torchtitan.train --module mpplan_titan --config mpplan_plan' \"$tmp/tt/cmd.sh\" && ! grep -q -- '--job.config_file' \"$tmp/tt/cmd.sh\""
ok "--emit torchtitan of an interleaved pp2 vpp2 plan with full recompute" plan -m llama3-8b -c dgx-a100-80g:4 --fix pp=2,vpp=2,recompute=full --emit torchtitan -o "$tmp/ttv"
ok "... four model parts, FullAC and the micro-batch (check.py)" check torchtitan "$tmp/ttv"
ok "... names the version" grep -q 'torchtitan 0.3.0' "$tmp/ttv/mpplan_titan.py"

ok "--emit horovod of a tp plan exits 0" plan -m gpt3-1.3b -c dgx-a100-80g:4 --fix tp=2 --emit horovod -o "$tmp/hv"
ok "... says Horovod has no tensor parallelism and what it emits" grep -q '^mpplan: plan --emit horovod: Horovod has no tensor parallelism; the best plan Horovod can run (it can run none that honours the --fix pins): dp=32 tp=1' "$tmp/err"
ok "horovod export passes check.py (Horovod 0.28.1 flags, 128 MB fusion)" check horovod "$tmp/hv"
ok "--emit horovod of a cp plan names Horovod in its reason" sh -c "\"$MPPLAN\" plan -q -m llama3-8b -c dgx-a100-80g:2 --fix cp=2,pp=1 --emit horovod -o \"$tmp/hvc\" 2>&1 >/dev/null | grep -q '^mpplan: plan --emit horovod: Horovod has no context or expert parallelism;'"
ok "--emit horovod of a full-recompute plan says how to recompute (check.py)" sh -c "\"$MPPLAN\" plan -q -m gpt3-1.3b -c dgx-a100-80g:1 --fix recompute=full --emit horovod -o \"$tmp/hvr\" >/dev/null 2>&1 && python3 \"$bridges/check.py\" horovod \"$tmp/hvr\" \"$bridges\""
ok "--emit tensorflow of a full-recompute plan says how to recompute (check.py)" sh -c "\"$MPPLAN\" plan -q -m gpt3-1.3b -c dgx-a100-80g:1 --fix recompute=full --emit tensorflow -o \"$tmp/tfr\" >/dev/null 2>&1 && python3 \"$bridges/check.py\" tensorflow \"$tmp/tfr\" \"$bridges\""
ok "gpt3-175b --emit horovod: nothing Horovod can run, exit 3" status_is 3 "$MPPLAN" plan -q -m gpt3-175b -c dgx-a100-80g:128 --emit horovod -o "$tmp/hvx"
ok "... naming Horovod" grep -q '^mpplan: plan --emit horovod: .*Horovod can run no plan here' "$tmp/err"

ok "--emit tensorflow on 2 nodes" plan -m gpt3-125m -c dgx-a100-80g:2 --emit tensorflow -o "$tmp/tf"
ok "tensorflow export passes check.py (TF_CONFIG, Keras accumulation)" check tensorflow "$tmp/tf"
ok "MultiWorkerMirroredStrategy across nodes" grep -q 'MultiWorkerMirroredStrategy' "$tmp/tf/strategy.py"
ok "--emit tensorflow on one node uses MirroredStrategy" sh -c "\"$MPPLAN\" plan -q -m mlp-1024 -c dgx-a100-80g:1 --emit tensorflow -o \"$tmp/tf1\" >/dev/null 2>&1 && grep -q 'MirroredStrategy()' \"$tmp/tf1/strategy.py\" && [ ! -e \"$tmp/tf1/tf_config.json\" ]"
ok "... one micro-batch: no gradient_accumulation_steps=1, which Keras refuses" sh -c "! grep -q 'gradient_accumulation_steps=1' \"$tmp/tf1/strategy.py\""
ok "... and passes check.py" check tensorflow "$tmp/tf1"
ok "--emit tensorflow of 4 micro-batches" plan -m gpt3-125m -c dgx-a100-80g:1 --fix num_micro_batches=4 --emit tensorflow -o "$tmp/tfa"
ok "... GRADIENT_ACCUMULATION_STEPS = 4 (check.py)" sh -c "grep -q '^GRADIENT_ACCUMULATION_STEPS = 4' \"$tmp/tfa/strategy.py\" && python3 \"$bridges/check.py\" tensorflow \"$tmp/tfa\" \"$bridges\""

ok "--emit mxnet" plan -m gpt3-1.3b -c dgx-a100-80g:1 -b 128 --fix pp=2,num_micro_batches=1,tp=1 --emit mxnet -o "$tmp/mx"
ok "mxnet places layers in ctx groups" grep -q '"block.0": "stage0"' "$tmp/mx/mxnet_setup.py"
ok "mxnet kvstore is 'device' on one node" grep -q 'KVSTORE = "device"' "$tmp/mx/mxnet_setup.py"
ok "mxnet export passes check.py" check mxnet "$tmp/mx"
ok "--emit mxnet of a 2-node plan with 2 micro-batches" plan -m gpt3-125m -c dgx-a100-80g:2 --fix num_micro_batches=2 --emit mxnet -o "$tmp/mxa"
ok "... accumulates (ACCUMULATE = 2, grad_req add) and takes tools/launch.py from MXNET_SOURCE_DIR (check.py)" check mxnet "$tmp/mxa"

ok "--emit of an unknown framework is a usage error" status_is 2 "$MPPLAN" plan -q -m mlp-1024 -c dgx-a100-80g:1 --emit caffe
ok "no temporary files are left behind" sh -c "! ls -a \"$tmp\"/*/ | grep -q '\\.tmp\\|~\$'"
ok "check.py fails a broken export (a world size that does not add up)" sh -c "cp -r \"$tmp/tr\" \"$tmp/trx\" && sed -i 's/--nnodes 2/--nnodes 3/' \"$tmp/trx/cmd.sh\" && ! python3 \"$bridges/check.py\" torchrun \"$tmp/trx\" \"$bridges\" 2>/dev/null >/dev/null"
ok "check.py fails a flag the framework lacks" sh -c "cp -r \"$tmp/ml\" \"$tmp/mlx\" && echo '--no-such-flag' >> \"$tmp/mlx/megatron_args.txt\" && ! python3 \"$bridges/check.py\" megatron \"$tmp/mlx\" \"$bridges\" >/dev/null"

# ---- compare -----------------------------------------------------------------------------
ok "compare mlp-1024 prints a row per strategy" sh -c "\"$MPPLAN\" compare -m mlp-1024 -c workstation-pcie4 > \"$tmp/c1\" && [ \$(grep -Ec '^(PyTorch DDP|PyTorch FSDP|TensorFlow MirroredStrategy|Horovod|MXNet|Megatron-LM 3D|DeepSpeed ZeRO|mpplan)' \"$tmp/c1\") -eq 8 ]"
ok "compare: Megatron-LM cannot run an mlp (no plan, says why)" grep -Eq '^Megatron-LM 3D +- .* no  Megatron-LM trains its own transformer models' "$tmp/c1"
ok "compare gpt3-175b: DDP does not fit, Megatron-LM 3D does" sh -c "\"$MPPLAN\" compare -m gpt3-175b -c dgx-a100-80g:128 > \"$tmp/c2\" && grep -Eq '^PyTorch DDP .* no ' \"$tmp/c2\" && grep -Eq '^Megatron-LM 3D .* yes ' \"$tmp/c2\""
ok "compare: MXNet's plain data-parallel plan is not called layer placement" sh -c "\"$MPPLAN\" compare -m gpt3-125m -c dgx-a100-80g:1 > \"$tmp/c3\" && grep -Eq '^MXNet data parallel \(kvstore\) +dp8 tp1 pp1' \"$tmp/c3\" && ! grep -Eq '^MXNet layer placement +dp[0-9]+ tp1 pp1 ' \"$tmp/c3\""
ok "compare --json parses" sh -c "\"$MPPLAN\" compare -m mlp-1024 -c dgx-a100-80g:1 --json > \"$tmp/c.json\" && json-glib-validate \"$tmp/c.json\" >/dev/null && [ \$(grep -c '\"strategy\"' \"$tmp/c.json\") -eq 8 ]"
ok "compare --json: FLOP/s under flops_per_gpu, no tflops_per_gpu" sh -c "grep -q '\"flops_per_gpu\"' \"$tmp/c.json\" && ! grep -q 'tflops_per_gpu' \"$tmp/c.json\""
ok "compare without --cluster is a usage error" status_is 2 "$MPPLAN" compare -m mlp-1024
ok "a cp = 8 plan is not labelled data parallel (DDP, Horovod)" sh -c "\"$MPPLAN\" import hf --seq-len 32768 \"$hf/qwen3-8b.json\" -o \"$tmp/q.yaml\" 2>/dev/null && \"$MPPLAN\" plan -q -m \"$tmp/q.yaml\" -c dgx-a100-80g:1 --fix cp=8 | grep '^Recommended' | grep 'cp=8' | grep -Eq '\(tensor, context or expert only[;)]'"
tap_done
