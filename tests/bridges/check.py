#!/usr/bin/env python3
"""check.py - holds one `mpplan plan --emit FRAMEWORK` folder to the framework it is for.

Usage: check.py FRAMEWORK DIR LISTS_DIR

Names (flags, config keys, fields) are checked against LISTS_DIR/FRAMEWORK.txt, read from
the framework's source at the version its first line names (extract.py regenerates it);
Python files are parsed with ast, JSON with json, nothing of the framework is imported.
Then consistency with the plan in the files' header: world size = tp x pp x cp x dp in
the launch, global batch = micro-batch x accumulation x dp, and vpp, recompute, ZeRO and
sequence parallelism carried over. Prints every problem; exit 1 when there is one."""
import argparse
import ast
import json
import os
import re
import shlex
import sys

problems = []


def bad(msg):
    problems.append(msg)


def names(lists, fw, section):
    out = set()
    with open(os.path.join(lists, fw + ".txt"), encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#") and line.split()[0] == section:
                out.add(line.split()[1])
    if not out:
        sys.exit(f"check.py: no '{section}' names in {fw}.txt")
    return out


# torchrun's launcher (torch/distributed/run.py, get_args_parser): the PyTorch repository
# is not fetched, so these few are kept by hand from its documentation.
TORCHRUN = {"--nnodes", "--nproc-per-node", "--node-rank", "--rdzv-backend",
            "--rdzv-endpoint", "--rdzv-id", "--standalone", "--master-addr", "--master-port"}
# TF_CONFIG (tf.distribute.cluster_resolver.TFConfigClusterResolver), kept by hand too.
TF_CONFIG = {"cluster", "worker", "task", "type", "index"}


def read(d, name):
    with open(os.path.join(d, name), encoding="utf-8") as f:
        return f.read()


def plan_of(text):
    """The plan mpplan wrote in the header: its choices, world size and nodes."""
    m = re.search(r"\((\d+) GPUs, (\d+) nodes\)", text)
    p = re.search(r"plan: dp=(\d+) tp=(\d+) pp=(\d+) vpp=(\d+) cp=(\d+) ep=(\d+) sp=(\w+) "
                  r"zero=(\d+) recompute=(\w+) micro-batch (\d+) x (\d+), schedule (\S+)", text)
    if not m or not p:
        sys.exit("check.py: no plan header")
    k = ["dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "recompute", "mb", "n", "schedule"]
    plan = dict(zip(k, p.groups()))
    for x in k:
        if plan[x].isdigit():
            plan[x] = int(plan[x])
    plan["world"], plan["nodes"] = int(m.group(1)), int(m.group(2))
    plan["keep"] = "weights kept from forward to backward" in text
    f = re.search(r"precision: (\w+), fp8=(yes|no)", text)
    if not f:
        sys.exit("check.py: no precision line in the header")
    plan["precision"], plan["fp8"] = f.group(1), f.group(2) == "yes"
    plan["global"] = plan["mb"] * plan["n"] * plan["dp"]
    if plan["dp"] * plan["tp"] * plan["pp"] * plan["cp"] != plan["world"]:
        bad(f"header: dp x tp x pp x cp != {plan['world']} GPUs")
    return plan


def command(text, program):
    """The words of the line that runs PROGRAM (shell-split, variables left as written)."""
    for line in text.splitlines():
        if not line.startswith("#") and re.search(r"(^|\s)" + re.escape(program) + r"\s", line):
            return shlex.split(line, comments=True)
    bad(f"cmd.sh: no {program} line")
    return []


def flags_of(words, allowed, what):
    for w in words:
        if w.startswith("-") and w.split("=")[0] not in allowed:
            bad(f"{what}: {w} is not a flag of it")


def value(words, flag):
    return words[words.index(flag) + 1] if flag in words else None


def check_torchrun_launch(words, plan):
    i = words.index("torchrun") if "torchrun" in words else 0
    end = next((j for j in range(i + 1, len(words)) if not words[j].startswith("-")
                and not words[j - 1].startswith("--") or words[j] == "-m"), len(words))
    flags_of(words[i + 1:end], TORCHRUN, "torchrun")
    n, per = value(words, "--nnodes"), value(words, "--nproc-per-node")
    if n is None or per is None or int(n) * int(per) != plan["world"]:
        bad(f"torchrun: --nnodes x --nproc-per-node is not the plan's {plan['world']} GPUs")


def megatron_pattern(x):
    """Megatron's moe_freq_type (also --window-attn-skip-freq's): an int, or a Python list
    expression of digits, commas, brackets, parentheses, + and * (arguments.py
    _eval_pattern refuses anything else), evaluated to the per-layer list."""
    if "[" not in x:
        return int(x)
    if re.search(r"[^,\d\[\]()+*]", x):
        raise ValueError(f"invalid pattern {x}")
    v = eval(x, {"__builtins__": {}})  # only digits and list operators, checked above
    if not isinstance(v, list):
        raise ValueError(f"pattern {x} is not a list")
    return v


def megatron_tuple(x):
    """Megatron's tuple_type: '(a,b)' or 'a,b' of ints."""
    return tuple(int(i) for i in x.strip("()").split(","))


class ParseError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ParseError(message)


def megatron_parser(lists):
    """Megatron-LM's argument parser rebuilt from the add_argument calls of its
    arguments.py (the 'arg' lines of megatron.txt): the same actions, nargs, choices and
    types, allow_abbrev=False as parse_args has it; converters other than these are
    taken as strings."""
    types = {"int": int, "float": float, "str": str, "tuple_type": megatron_tuple,
             "moe_freq_type": megatron_pattern}
    p = Parser(add_help=False, allow_abbrev=False)
    with open(os.path.join(lists, "megatron.txt"), encoding="utf-8") as f:
        for line in f:
            w = line.split()
            if not w or w[0] != "arg":
                continue
            spec = dict(x.split("=", 1) for x in w[2:])
            kw = {"dest": w[1].lstrip("-").replace("-", "_") + "__" + str(len(p._actions))}
            if "action" in spec:
                kw["action"] = spec["action"]
            if spec.get("action", "store") in ("store", "append"):
                kw["type"] = types.get(spec.get("type"), str)
                if "nargs" in spec:
                    kw["nargs"] = spec["nargs"]
                if spec.get("choices", "other") != "other":
                    kw["choices"] = [kw["type"](c) for c in spec["choices"].split(",")]
            try:
                p.add_argument(w[1], **kw)
            except (ValueError, TypeError, argparse.ArgumentError):
                p.add_argument(w[1], nargs="*")  # an action this rebuild cannot copy
    return p


def megatron_semantics(a, values):
    """What Megatron-Core checks after parsing (transformer_config.py __post_init__,
    gpt_layer_specs.py): per-layer patterns as long as the model, the recompute modules
    it knows and their preconditions."""
    layers = int(a.get("--num-layers", 0))
    for f in ("--moe-layer-freq", "--window-attn-skip-freq"):
        v = values.get(f)
        if isinstance(v, list) and len(v) != layers:
            bad(f"megatron_args.txt: {f} lists {len(v)} layers, the model has {layers}")
    w = values.get("--window-size")
    if w is not None and (len(w) != 2 or w[0] < 0 or w[1] != 0):
        bad(f"megatron_args.txt: --window-size {w} is not a causal (left, 0) window")
    mods = values.get("--recompute-modules") or []
    allowed = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
               "shared_experts"}
    if set(mods) - allowed:
        bad(f"megatron_args.txt: --recompute-modules {set(mods) - allowed} unknown")
    if "moe_act" in mods and "--moe-grouped-gemm" not in a:
        bad("megatron_args.txt: moe_act recompute needs --moe-grouped-gemm")
    if "mla_up_proj" in mods and "--multi-latent-attention" not in a:
        bad("megatron_args.txt: mla_up_proj recompute needs --multi-latent-attention")
    if "--fp8-format" in a and a.get("--fp8-recipe", "delayed") == "delayed" \
            and {"moe_act", "layernorm"} & set(mods):
        bad("megatron_args.txt: delayed-scaling fp8 cannot recompute moe_act or layernorm")


def megatron(d, lists):
    cmd, args = read(d, "cmd.sh"), read(d, "megatron_args.txt")
    plan = plan_of(cmd)
    known = names(lists, "megatron", "flag")
    a = {}
    for line in args.splitlines():
        w = line.split()
        if w[0] not in known:
            bad(f"megatron_args.txt: {w[0]} is not a Megatron-LM argument")
        a[w[0]] = w[1] if len(w) > 1 else True
    # The words pretrain_gpt.py gets ($(cat megatron_args.txt) splits on white space).
    parser, values = megatron_parser(lists), {}
    try:
        ns = vars(parser.parse_args(args.split()))
        for act in parser._actions:
            if ns.get(act.dest) is not None:
                values[act.option_strings[0]] = ns[act.dest]
    except (ParseError, ValueError) as e:
        bad(f"megatron_args.txt: Megatron-LM's parser: {e}")
    megatron_semantics(a, values)
    if plan["fp8"] != (values.get("--fp8-format") == "hybrid"):
        bad("megatron_args.txt: --fp8-format hybrid does not match the plan's fp8")
    if plan["ep"] > 1 and int(a.get("--expert-model-parallel-size", 1)) != plan["ep"]:
        bad("megatron_args.txt: --expert-model-parallel-size is not the plan's ep")
    want = {"--tensor-model-parallel-size": plan["tp"], "--pipeline-model-parallel-size":
            plan["pp"], "--micro-batch-size": plan["mb"], "--global-batch-size": plan["global"]}
    for f, v in want.items():
        if int(a.get(f, 0)) != v:
            bad(f"megatron_args.txt: {f} is not {v}")
    if int(a.get("--context-parallel-size", 1)) != plan["cp"]:
        bad("megatron_args.txt: --context-parallel-size is not the plan's cp")
    if (plan["sp"] == "yes") != ("--sequence-parallel" in a):
        bad("megatron_args.txt: --sequence-parallel does not match the plan")
    if (plan["zero"] == 1) != ("--use-distributed-optimizer" in a):
        bad("megatron_args.txt: --use-distributed-optimizer does not match ZeRO-1")
    gran = a.get("--recompute-granularity", "none")
    if gran != plan["recompute"]:
        bad(f"megatron_args.txt: recompute {gran}, the plan's is {plan['recompute']}")
    layers = (int(a.get("--num-layers", 0)) + ("--account-for-embedding-in-pipeline-split"
              in a) + ("--account-for-loss-in-pipeline-split" in a))
    if plan["vpp"] > 1:
        layout = a.get("--pipeline-model-parallel-layout")
        per = a.get("--num-layers-per-virtual-pipeline-stage")
        # The --account-for-* flags count the embedding and the loss as a layer each.
        chunks = layout.count("|") + 1 if layout else (
            layers // int(per) if per and layers % int(per) == 0 else 1)
        if chunks != plan["pp"] * plan["vpp"]:
            bad(f"megatron_args.txt: {chunks} chunks, not pp x vpp")
    if plan["pp"] > 1 and "--pipeline-model-parallel-layout" not in a:
        # arguments.py validate_args / transformer_block.py: what is left splits evenly.
        rest, stages = layers, plan["pp"] * (plan["vpp"] if plan["vpp"] > 1 else 1)
        for f in ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"):
            if f in a:
                rest, stages = rest - int(a[f]) * plan["vpp"], stages - plan["vpp"]
        if stages > 0 and rest % stages != 0:
            bad(f"megatron_args.txt: {rest} layers do not split over {stages} chunks")
    if a.get("--position-embedding-type") == "rope" and "--rotary-base" not in a:
        bad("megatron_args.txt: rope without --rotary-base")
    for f in ("--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length"):
        if f not in a:
            bad(f"megatron_args.txt: no {f}: pretrain_gpt.py cannot build the model")
    words = command(cmd, "torchrun")
    check_torchrun_launch(words, plan)
    if not any("MEGATRON_LM_DIR" in w and w.endswith("/pretrain_gpt.py") for w in words):
        bad("cmd.sh: pretrain_gpt.py is not looked up in $MEGATRON_LM_DIR")


def deepspeed(d, lists):
    cmd = read(d, "cmd.sh")
    plan = plan_of(cmd)
    cfg = json.loads(read(d, "ds_config.json"))
    for k in cfg:
        if k not in names(lists, "deepspeed", "key"):
            bad(f"ds_config.json: {k} is not a DeepSpeed key")
    sub = {"zero_optimization": "zero", "bf16": "precision", "fp16": "precision",
           "pipeline": "pipeline", "activation_checkpointing": "activation_checkpointing"}
    for k, sec in sub.items():
        for kk in cfg.get(k, {}):
            if kk not in names(lists, "deepspeed", sec):
                bad(f"ds_config.json: {k}.{kk} is not a DeepSpeed key")
    tb, mb, ga = (cfg["train_batch_size"], cfg["train_micro_batch_size_per_gpu"],
                  cfg["gradient_accumulation_steps"])
    if tb != mb * ga * plan["dp"] or (mb, ga) != (plan["mb"], plan["n"]):
        bad("ds_config.json: the batch is not micro-batch x accumulation x dp of the plan")
    if cfg["zero_optimization"]["stage"] != plan["zero"]:
        bad("ds_config.json: the ZeRO stage is not the plan's")
    if plan["pp"] > 1 and cfg.get("pipeline", {}).get("stages") != plan["pp"]:
        bad("ds_config.json: pipeline.stages is not the plan's pp")
    recompute_said(plan, cmd + json.dumps(cfg), "checkpoint", "ds_config.json/cmd.sh")
    fp8_said(plan, cmd, "te.fp8_autocast", "cmd.sh")
    if plan["ep"] > 1 and f"ep_size={plan['ep']}" not in cmd:
        bad("cmd.sh: the plan's experts (ep) are not said: deepspeed.moe.layer.MoE(ep_size=...)")
    if plan["recompute"] == "full" and plan["pp"] == 1 and "deepspeed.checkpointing" not in cmd:
        bad("cmd.sh: full recompute at pp = 1 without saying the model must call "
            "deepspeed.checkpointing")
    words = command(cmd, "deepspeed")
    script = next(i for i, w in enumerate(words) if w.endswith(".py"))
    flags_of(words[1:script], names(lists, "deepspeed", "flag"), "the deepspeed launcher")
    flags_of(words[script + 1:], names(lists, "deepspeed", "script"), "deepspeed's script args")
    if int(value(words, "--num_nodes")) * int(value(words, "--num_gpus")) != plan["world"]:
        bad("cmd.sh: --num_nodes x --num_gpus is not the plan's world size")


def python_of(d, name):
    try:
        return ast.parse(read(d, name), name)
    except SyntaxError as e:
        bad(f"{name}: not Python: {e}")
        return ast.parse("")


def constants(tree):
    """Module-level NAME = literal and A, B = literal, literal."""
    out = {}
    for n in tree.body:
        if not isinstance(n, ast.Assign) or not isinstance(n.value, (ast.Constant, ast.List,
                                                                      ast.Tuple)):
            continue
        t, v = n.targets[0], ast.literal_eval(n.value)
        if isinstance(t, ast.Name):
            out[t.id] = v
        elif isinstance(t, ast.Tuple):
            out.update({e.id: x for e, x in zip(t.elts, v)})
    return out


def torchrun(d, lists):
    cmd, py = read(d, "cmd.sh"), read(d, "parallel.py")
    plan = plan_of(cmd)
    tree = python_of(d, "parallel.py")
    mesh = next((n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", "") == "init_device_mesh"), None)
    if mesh is None:
        bad("parallel.py: no init_device_mesh")
    else:
        shape = ast.literal_eval(mesh.args[1])
        dims = ast.literal_eval(next(k.value for k in mesh.keywords
                                     if k.arg == "mesh_dim_names"))
        prod = 1
        for x in shape:
            prod *= x
        if prod != plan["world"]:
            bad(f"parallel.py: the mesh holds {prod} ranks, not {plan['world']}")
        if plan["cp"] > 1 and ("cp" not in dims or "_flatten" not in py):
            bad("parallel.py: cp > 1 but gradients are not reduced over dp x cp")
    recompute_said(plan, py, "torch.utils.checkpoint", "parallel.py")
    fp8_said(plan, cmd, "te.fp8_autocast", "cmd.sh")
    if plan["cp"] > 1 and "buffer_seq_dims" not in py:
        bad("parallel.py: context_parallel without buffer_seq_dims")
    if re.search(r'mesh=mesh\["dp"\]|device_mesh=mesh\["dp"\]', py) and plan["cp"] > 1:
        bad("parallel.py: DDP/FSDP over mesh['dp'] alone with cp > 1")
    c = constants(tree)
    if (c.get("PP"), c.get("VPP")) != (plan["pp"], plan["vpp"]) \
            or len(c.get("LAYERS_PER_CHUNK", [])) != plan["pp"] * plan["vpp"]:
        bad("parallel.py: PP, VPP or LAYERS_PER_CHUNK do not match the plan")
    if c.get("GLOBAL_BATCH") != plan["global"]:
        bad("parallel.py: GLOBAL_BATCH is not micro-batch x accumulation x dp")
    check_torchrun_launch(command(cmd, "torchrun"), plan)


def torchtitan(d, lists):
    cmd = read(d, "cmd.sh")
    plan = plan_of(cmd)
    tree = python_of(d, "mpplan_titan.py")
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name == "mpplan_plan"), None)
    if fn is None:
        bad("mpplan_titan.py: no mpplan_plan()")
        return
    sections = {"p": "parallelism", "t": "training"}
    got = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Attribute):
            t = n.targets[0]
            owner = getattr(t.value, "id", None) or getattr(t.value, "attr", None)
            if owner in sections:
                if t.attr not in names(lists, "torchtitan", sections[owner]):
                    bad(f"mpplan_titan.py: {sections[owner]}.{t.attr} is not a torchtitan "
                        "field")
                got[t.attr] = n.value
            elif t.attr == "activation_checkpoint":
                got["ac"] = n.value
    v = {k: ast.literal_eval(x) for k, x in got.items()
         if k != "ac" and not isinstance(x, ast.Call)}
    rep, shard = v.get("data_parallel_replicate_degree", 1), v.get("data_parallel_shard_degree", -1)
    if rep * shard != plan["dp"]:
        bad("mpplan_titan.py: replicate x shard degrees are not the plan's dp")
    if (shard > 1) != (plan["zero"] >= 2 and plan["dp"] > 1) and plan["dp"] > 1:
        bad("mpplan_titan.py: FSDP sharding does not match the plan's ZeRO stage")
    if plan["zero"] >= 2 and v.get("fsdp_reshard_after_forward") != (
            "always" if plan["zero"] == 3 and not plan["keep"] else "never"):
        bad("mpplan_titan.py: fsdp_reshard_after_forward is not the plan's ZeRO stage")
    for k, want in (("tensor_parallel_degree", "tp"), ("pipeline_parallel_degree", "pp"),
                    ("context_parallel_degree", "cp"), ("expert_parallel_degree", "ep")):
        if v.get(k, 1) != plan[want]:
            bad(f"mpplan_titan.py: {k} is not the plan's {want}")
    if v.get("enable_sequence_parallel") != (plan["sp"] == "yes"):
        bad("mpplan_titan.py: enable_sequence_parallel is not the plan's")
    local = plan["mb"] * (plan["n"] if plan["pp"] > 1 else 1)
    if v.get("local_batch_size") != local or v.get("global_batch_size") != plan["global"]:
        bad("mpplan_titan.py: local/global batch do not give micro-batch x accumulation x dp")
    if plan["pp"] > 1:
        if v.get("pipeline_parallel_microbatch_size") != plan["mb"]:
            bad("mpplan_titan.py: pipeline_parallel_microbatch_size is not the micro-batch")
        if len(v.get("module_fqns_per_model_part", [])) != plan["pp"] * plan["vpp"]:
            bad("mpplan_titan.py: module_fqns_per_model_part is not pp x vpp chunks")
    ac = got.get("ac")
    ac_name = (ac.func.value.id if isinstance(ac, ast.Call) else "none") if ac else "unset"
    want = {"full": "FullAC", "selective": "SelectiveAC", "none": "none"}[plan["recompute"]]
    if ac_name != want:
        bad(f"mpplan_titan.py: activation_checkpoint {ac_name}, the plan's is {want}")
    if ac_name not in names(lists, "torchtitan", "ac") | {"none"}:
        bad(f"mpplan_titan.py: {ac_name} is not a torchtitan policy")
    quant = names(lists, "torchtitan", "quantization")
    used = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
            and n.module == "torchtitan.components.quantization" for a in n.names}
    for u in used - quant:
        bad(f"mpplan_titan.py: {u} is not a torchtitan converter")
    called = {n.func.value.id for n in ast.walk(fn) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and n.func.attr == "Config"
              and isinstance(n.func.value, ast.Name)}
    if plan["fp8"] != ("Float8LinearConverter" in called):
        bad("mpplan_titan.py: Float8LinearConverter does not match the plan's fp8")
    words = command(cmd, "torchrun")
    check_torchrun_launch(words, plan)
    tail = words[words.index("torchtitan.train") + 1:] if "torchtitan.train" in words else []
    for f in ("--module", "--config"):
        if f not in tail or f not in names(lists, "torchtitan", "flag"):
            bad(f"cmd.sh: torchtitan 0.3.0 needs {f}")
    if any(w.startswith("--job.") for w in tail):
        bad("cmd.sh: --job.* is gone in torchtitan 0.3.0")


def fp8_said(plan, text, how, what):
    if plan["fp8"] and how not in text:
        bad(f"{what}: the plan runs fp8 GEMMs but nothing says {how}")


def recompute_said(plan, text, how, what):
    if plan["recompute"] != "none" and how not in text:
        bad(f"{what}: the plan recomputes ({plan['recompute']}) but nothing says {how}")


def horovod(d, lists):
    cmd = read(d, "cmd.sh")
    plan = plan_of(cmd)
    recompute_said(plan, cmd, "torch.utils.checkpoint", "cmd.sh")
    fp8_said(plan, cmd, "te.fp8_autocast", "cmd.sh")
    words = command(cmd, "horovodrun")
    i, j = words.index("horovodrun"), words.index("python")
    flags_of(words[i + 1:j], names(lists, "horovod", "flag"), "horovodrun")
    if int(value(words, "-np")) != plan["world"]:
        bad("cmd.sh: -np is not the plan's world size")
    if value(words, "--fusion-threshold-mb") != "128":
        bad("cmd.sh: --fusion-threshold-mb is not Horovod's 128 MB default")
    if f"backward_passes_per_step={plan['n']}" not in cmd:
        bad("cmd.sh: backward_passes_per_step is not the plan's accumulation")


def tensorflow(d, lists):
    cmd = read(d, "cmd.sh")
    plan = plan_of(cmd)
    c = constants(python_of(d, "strategy.py"))
    recompute_said(plan, read(d, "strategy.py"), "tf.recompute_grad", "strategy.py")
    fp8_said(plan, read(d, "strategy.py"), 'quantize("float8")', "strategy.py")
    if c.get("GLOBAL_BATCH") != plan["global"]:
        bad("strategy.py: GLOBAL_BATCH is not micro-batch x accumulation x dp")
    steps = c.get("GRADIENT_ACCUMULATION_STEPS")
    if (steps or 1) != plan["n"] or (steps is not None and steps < 2):
        bad("strategy.py: GRADIENT_ACCUMULATION_STEPS must be the plan's, and Keras takes "
            "only >= 2")
    if "gradient_accumulation_steps" not in names(lists, "keras", "optimizer"):
        bad("keras.txt: no gradient_accumulation_steps")
    if plan["nodes"] > 1:
        tf = json.loads(read(d, "tf_config.json"))
        if len(tf) != plan["nodes"]:
            bad("tf_config.json: not one TF_CONFIG per node")
        for t in tf:
            for k in list(t) + list(t["cluster"]) + list(t["task"]):
                if k not in TF_CONFIG:
                    bad(f"tf_config.json: {k} is not a TF_CONFIG key")


def mxnet(d, lists):
    cmd = read(d, "cmd.sh")
    plan = plan_of(cmd)
    c = constants(python_of(d, "mxnet_setup.py"))
    recompute_said(plan, cmd, "MXNET_BACKWARD_DO_MIRROR", "cmd.sh")
    if plan["fp8"]:
        bad("cmd.sh: MXNet 1.9 has no FP8 training, yet the plan is fp8")
    if (c.get("BATCH_PER_REPLICA"), c.get("ACCUMULATE")) != (plan["mb"], plan["n"]):
        bad("mxnet_setup.py: BATCH_PER_REPLICA x ACCUMULATE is not the plan's batch")
    if plan["n"] > 1 and 'grad_req="add"' not in read(d, "mxnet_setup.py"):
        bad("mxnet_setup.py: accumulation without grad_req='add'")
    if "grad_req" not in names(lists, "mxnet", "bind"):
        bad("mxnet.txt: Module.bind has no grad_req")
    if plan["nodes"] > 1:
        words = command(cmd, "python3")
        launch = next(w for w in words if w.endswith("tools/launch.py"))
        if "MXNET_SOURCE_DIR" not in launch:
            bad("cmd.sh: tools/launch.py is not looked up in $MXNET_SOURCE_DIR")
        i = words.index(launch)
        j = next(k for k in range(i + 1, len(words)) if words[k] == "python3")
        flags_of(words[i + 1:j], names(lists, "mxnet", "flag"), "tools/launch.py")
        if int(value(words, "-n")) != plan["nodes"]:
            bad("cmd.sh: launch.py -n is not one worker per node")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    fw, d, lists = sys.argv[1:]
    globals()[fw](d, lists)
    for p in problems:
        print(f"check.py {fw} {d}: {p}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
