#!/usr/bin/env python3
"""extract.py - regenerate the name lists tests/bridges/check.py holds exports against.

Usage: extract.py FRAMEWORK SOURCE_DIR VERSION > tests/bridges/FRAMEWORK.txt

SOURCE_DIR is a checkout (or unpacked release) of the framework at VERSION, e.g.
  git --git-dir=Megatron-LM/.git archive core_v0.15.3 | tar -x -C /tmp/mg
  extract.py megatron /tmp/mg core_v0.15.3 > tests/bridges/megatron.txt
Every list is read from the framework's own source with Python's ast (nothing is
imported, so nothing of the framework needs to be installed). Output: a '# ' header
naming the framework, version and files, then one 'SECTION NAME' per line."""
import ast
import os
import re
import sys


def parse(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return ast.parse(f.read(), rel)


def argparse_flags(tree):
    """Every '--flag' given to an add_argument call."""
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) \
                        and a.value.startswith("-"):
                    out.add(a.value)
    return out


def class_fields(tree, name):
    """Annotated attributes of class NAME (dataclass / pydantic fields), nested or not."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {s.target.id for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise SystemExit(f"extract.py: no class {name}")


def string_constants(tree):
    """Values of module-level NAME = "string" assignments (DeepSpeed's key constants)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            out.add(node.value.value)
    return out


def dict_keys_in(tree, func):
    """String keys of the dict literals in function FUNC."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == func:
            return {k.value for d in ast.walk(node) if isinstance(d, ast.Dict)
                    for k in d.keys if isinstance(k, ast.Constant)}
    raise SystemExit(f"extract.py: no function {func}")


def call_kwargs(tree, cls, method):
    """Parameter names of CLS.METHOD."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == method:
                    a = f.args
                    return {x.arg for x in a.args + a.kwonlyargs}
    raise SystemExit(f"extract.py: no {cls}.{method}")


def argparse_specs(tree):
    """'--flag key=value ...' for every add_argument call: its action, nargs, literal
    choices and type (a builtin's or a converter's name; 'other' for a lambda), what
    check.py needs to rebuild the parser and parse an export with argparse itself."""
    out = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant)
                 and isinstance(a.value, str) and a.value.startswith("-")]
        spec = []
        for k in node.keywords:
            if k.arg in ("action", "nargs") and isinstance(k.value, ast.Constant):
                spec.append(f"{k.arg}={k.value.value}")
            elif k.arg == "type":
                spec.append("type=" + (k.value.id if isinstance(k.value, ast.Name)
                                       else "other"))
            elif k.arg == "choices":
                try:
                    spec.append("choices=" + ",".join(str(c) for c in
                                                      ast.literal_eval(k.value)))
                except ValueError:
                    spec.append("choices=other")
        out |= {" ".join([f] + spec) for f in flags}
    return out


def megatron(root):
    f = "megatron/training/arguments.py"
    t = parse(root, f)
    return [f], {"flag": argparse_flags(t), "arg": argparse_specs(t)}


def get_keys(tree):
    """First arguments of PARAM.get("key", ...) calls: the keys a config reader looks up."""
    return {n.args[0].value for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get" and n.args and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)}


def deepspeed(root):
    files = ["deepspeed/launcher/runner.py", "deepspeed/runtime/constants.py",
             "deepspeed/runtime/zero/config.py", "deepspeed/runtime/precision_config.py",
             "deepspeed/runtime/activation_checkpointing/config.py",
             "deepspeed/runtime/config.py", "deepspeed/__init__.py"]
    t = {f: parse(root, f) for f in files}
    return files, {
        "flag": argparse_flags(t[files[0]]),
        "script": argparse_flags(t[files[6]]),
        "key": string_constants(t[files[1]]) | string_constants(t[files[2]])
               | string_constants(t[files[4]]) | get_keys(t[files[5]]),
        "zero": class_fields(t[files[2]], "DeepSpeedZeroConfig"),
        "precision": class_fields(t[files[3]], "DeepSpeedFP16Config")
                     | class_fields(t[files[3]], "DeepSpeedBF16Config"),
        "activation_checkpointing": string_constants(t[files[4]]),
        "pipeline": dict_keys_in(t[files[5]], "get_pipeline_config"),
    }


def torchtitan(root):
    files = ["torchtitan/config/configs.py", "torchtitan/distributed/activation_checkpoint.py",
             "torchtitan/config/manager.py", "torchtitan/components/quantization/__init__.py"]
    t = {f: parse(root, f) for f in files}
    exported = {a.asname or a.name for n in ast.walk(t[files[3]])
                if isinstance(n, ast.ImportFrom) for a in n.names}
    ac = {n.name for n in ast.walk(t[files[1]]) if isinstance(n, ast.ClassDef)}
    flags = argparse_flags(t[files[2]]) | {
        c.value for c in ast.walk(t[files[2]])
        if isinstance(c, ast.Constant) and c.value in ("--module", "--config")}
    return files, {"parallelism": class_fields(t[files[0]], "ParallelismConfig"),
                   "training": class_fields(t[files[0]], "TrainingConfig"),
                   "ac": ac & {"FullAC", "SelectiveAC", "MemoryBudgetAC"},
                   "quantization": {x for x in exported if x.endswith("Converter")},
                   "flag": flags}


def horovod(root):
    f = "horovod/runner/launch.py"
    return [f], {"flag": argparse_flags(parse(root, f))}


def keras(root):
    f = "keras/src/optimizers/base_optimizer.py"
    return [f], {"optimizer": call_kwargs(parse(root, f), "BaseOptimizer", "__init__")}


def mxnet(root):
    files = ["tools/launch.py", "python/mxnet/module/module.py"]
    return files, {"flag": argparse_flags(parse(root, files[0])),
                   "bind": call_kwargs(parse(root, files[1]), "Module", "bind")}


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    fw, root, version = sys.argv[1:]
    files, sections = globals()[fw](root)
    print(f"# {version}: names read from {', '.join(files)} by tests/bridges/extract.py")
    for sec in sorted(sections):
        for name in sorted(sections[sec]):
            if re.fullmatch(r"-{0,2}[A-Za-z_][A-Za-z0-9_.-]*", name.split(" ")[0]):
                print(sec, name)


if __name__ == "__main__":
    main()
