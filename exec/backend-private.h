/* backend-private.h - what exec/'s backends share: the host-side exchanges over the MPI
 * world that every backend offers alike (backend-mpi.c), and the host's kernel table
 * (backend-host-kernels.c). Private to the backends; no MPI type appears here. */
#pragma once
#include "exec/backend.h"

G_BEGIN_DECLS

/* A failed MPI call's return code RC as an MP_ERROR_RUNTIME naming CALL at FILE:LINE with
 * MPI's own message; FALSE. */
gboolean mp_mpi_error (int rc, const char *call, const char *file, int line, GError **error);
/* The STYLE.md MP_*_TRY pattern for MPI calls (MPI_SUCCESS is 0): in a gboolean function
 * with `error` in scope, a failure returns FALSE with the error set. */
#define MP_MPI_TRY(call)                                                                    \
  G_STMT_START                                                                              \
  {                                                                                         \
    int rc_ = (call);                                                                       \
    if (rc_ != 0)                                                                           \
      return mp_mpi_error (rc_, #call, __FILE__, __LINE__, error);                          \
  }                                                                                         \
  G_STMT_END

/* MpBackendOps.barrier, .host_all_reduce and .host_all_gather on MPI_COMM_WORLD (a world
 * of one, BE->size 1, never calls MPI). */
gboolean mp_mpi_world_barrier (MpBackend *be, GError **error);
gboolean mp_mpi_world_all_reduce (MpBackend *be, double *x, gsize n, MpReduceOp op,
                                  GError **error);
gboolean mp_mpi_world_all_gather (MpBackend *be, const void *mine, gsize bytes, void *all,
                                  GError **error);

/* kernels/cpu as MpKernelOps (the backend argument unused). */
extern const MpKernelOps mp_backend_host_kernels;
/* kernels/cpu's attention variants (backend-host-attn.c). */
extern const MpAttnKernelOps mp_backend_host_attn_kernels;

/* The cuda backend as its module mpplan-cuda.so exports it (symbol mp_cuda_module,
 * backend-cuda.c); ABI guards against a module built from other sources (a stale install). */
#define MP_CUDA_MODULE_ABI ((guint) (sizeof (MpBackendOps) << 16 | sizeof (MpKernelOps)))
typedef struct {
  guint abi;
  /* One GPU per rank (local rank % devices), NCCL groups. Caller owns. */
  MpBackend *(*open) (int rank, int size, gboolean bf16, GError **error);
  int (*devices) (void);     /* 0 without a driver or a device */
} MpCudaModule;

G_END_DECLS
