/* model-private.h - what the files of model/ share and nobody else sees.
 *
 * model-yaml.c reads and checks the hyper-parameters into an MpModel, then
 * mp_model_build_ir() (model.c) turns them into layers and ops and sums the totals. */
#pragma once
#include "model/model.h"

G_BEGIN_DECLS

/* Input limits: beyond these a file is refused rather than trusted, so every product the
 * IR forms stays far inside a double and the op arrays stay a sane size. */
#define MP_MODEL_MAX_DIM 10000000u        /* hidden, heads, ffn, vocab, seq_len, ... */
/* Transformer blocks or MLP layers: 10x the deepest published transformer (DeepNet, 1000
 * layers), and small enough that describe --json (every op of every layer) stays fast. */
#define MP_MODEL_MAX_LAYERS 10000u
#define MP_MODEL_MAX_EXPERTS 100000u
#define MP_MODEL_MAX_BATCH 1000000000u    /* sequences per optimizer step */

/* Fills M->layers and the totals from M's hyper-parameters, which must already be
 * validated (model-yaml.c). Cannot fail. */
void mp_model_build_ir (MpModel *m);

/* Bytes of one activation element: 4 for fp32 training, 2 for fp16/bf16 mixed precision. */
double mp_model_act_elt_bytes (const MpModel *m);

/* Lower-case names used in files, messages and JSON. */
const char *mp_model_arch_name (MpArch arch);
const char *mp_model_norm_name (MpNorm norm);
const char *mp_model_position_name (MpPosition pos);
const char *mp_model_optimizer_name (MpOptimizer opt);
const char *mp_layer_kind_name (MpLayerKind kind);

G_END_DECLS
