/* topology.h - a cluster: node groups of devices, NVLink domains of nodes, and the link
 * tiers between them.
 *
 * Built once by mp_cluster_load() and read-only afterwards. Answers which link tiers a
 * group of ranks crosses under a placement, and the bottleneck bandwidth and latency at
 * each. Not here: models, plans, collective algorithms (costmodel/ does those).
 * Units: bytes, seconds, bytes/s, FLOP/s; a bandwidth is per device and per direction,
 * except the cluster tier's, which is per NIC (nics_per_node NICs serve a node, default
 * one per device). When every device of a node talks across nodes at once, each gets
 * min (nic_bw, nic_bw * nics_per_node / devices_per_node).
 * A domain (GB200 NVL72: 18 compute trays of 4 GPUs on one NVLink switch system) is a run
 * of nodes_per_domain consecutive nodes whose devices reach each other over the domain
 * tier's link (per device, the same scale-up ports as the node link); a cluster without a
 * domain tier has nodes_per_domain 1, so every node is its own domain.
 *
 * The file format is described in examples/README.md; the bundled clusters ("the zoo")
 * are examples/clusters/NAME.yaml. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>
#include "common/units.h"

G_BEGIN_DECLS

/* Input limits: beyond these a file is refused rather than trusted (and the world size
 * must fit in a guint). */
#define MP_CLUSTER_MAX_NODES 1000000u
#define MP_CLUSTER_MAX_DEVICES_PER_NODE 100000u
/* device_overhead_bytes when a file gives no `device_overhead`: none, since the memory
 * model then reserves the runtime's parts itself, each for the plan at hand (the CUDA
 * context, NCCL's buffers per communicator, allocator fragmentation: costmodel/memory.c). */
#define MP_CLUSTER_DEFAULT_DEVICE_OVERHEAD_BYTES 0.0

/* Link tiers, ordered best -> worst, so "<=" means "at least as good". */
typedef enum {
  MP_TIER_NODE,      /* inside a node: NVLink/NVSwitch, PCIe, or shared memory */
  MP_TIER_DOMAIN,    /* between the nodes of one NVLink domain (NVL72: the trays of a rack,
                      * through the NVLink switch trays) */
  MP_TIER_CLUSTER,   /* between domains (nodes, without a domain tier): InfiniBand, RoCE,
                      * Ethernet */
  MP_TIER_N
} MpTier;

typedef struct {
  MpTier tier;
  char *name;          /* "nvlink3-nvswitch", "ib-hdr", ... */
  double bw_Bps;       /* per direction: per device (node, domain tier) or per NIC (cluster) */
  double latency_s;    /* one-way latency of a small message */
  guint nics_per_node; /* cluster tier: NICs per node (default devices_per_node) */
} MpLink;

typedef struct {
  char *name;                    /* "A100-SXM4-80GB" */
  double memory_bytes;
  double mem_bw_Bps;             /* HBM (or DRAM) bandwidth */
  double peak_flops[MP_DTYPE_N]; /* dense peak per dtype; 0 = not supported */
  gboolean calibrated;           /* FALSE: documented placeholders (the `host` device) */
  double power_limit_w;          /* the board's power limit in W where the file sets one
                                  * below the part's rating (power_limit_w); 0: as rated */
} MpDevice;

typedef struct {
  char *name;                    /* group name ("" for a homogeneous cluster) */
  guint nodes, devices_per_node;
  MpDevice device;
  guint first_node;              /* index of this group's first node in the cluster */
  guint first_device;            /* index of this group's first device (node-major) */
} MpNodeGroup;

typedef struct _MpCluster MpCluster;
struct _MpCluster {
  char *name;
  char *source;                  /* file it came from */
  MpNodeGroup *groups;           /* one for a homogeneous cluster */
  guint n_groups;
  MpLink links[MP_TIER_N];       /* one link per tier; a single-node cluster may lack the
                                  * cluster tier (has_link[MP_TIER_CLUSTER] FALSE), and a
                                  * cluster with one device per node the node tier */
  gboolean has_link[MP_TIER_N];
  guint nodes;                   /* over all groups */
  guint world_size;              /* devices over all groups */
  guint nodes_per_domain;        /* consecutive nodes per NVLink domain (the last one may
                                  * hold fewer); 1 without a domain tier */
  guint domains;                 /* ceil (nodes / nodes_per_domain) */
  double device_overhead_bytes;  /* per device, reserved for the runtime context and
                                  * allocator fragmentation (memory model subtracts it) */
  gboolean device_overhead_given; /* the file said so; else the memory model models it */
  char *profile;                 /* calibration profile path from the file, or NULL */
  gboolean heterogeneous;        /* more than one distinct device */
};

/* Loads NAME_OR_PATH: a file path, or a zoo name, either with an optional ":N" suffix
 * that sets the number of nodes to N for every cluster ("dgx-a100-80g:16" = 16 DGX
 * nodes, "host:1" = this machine), or of domains for a cluster with a domain tier
 * ("gb200-nvl72:4" = 4 racks of 18 trays); ":Ng" sets the devices instead, a whole number
 * of nodes ("gb200-nvl72:256g" = 64 trays, the last rack short). More than one node needs
 * a cluster tier (more than one domain, with domains); a suffix needs a cluster without
 * `groups`. Caller owns; NULL with an MP_ERROR_INPUT error listing every problem as
 * FILE:LINE:COLUMN: message (MP_ERROR_IO for a file that cannot be read). */
MpCluster *mp_cluster_load (const char *name_or_path, GError **error);
MpCluster *mp_cluster_load_file (const char *path, GError **error);
MpCluster *mp_cluster_load_data (const char *name, const char *data, gsize len, GError **error);
/* A deep copy (caller owns): how a variant of a loaded cluster is made, such as one a
 * calibration profile applies to (mp_cost_profile_apply), the loaded one staying as it
 * was. */
MpCluster *mp_cluster_copy (const MpCluster *cluster);
void mp_cluster_free (MpCluster *cluster);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MpCluster, mp_cluster_free)

/* Does this YAML document look like a cluster (a mapping with 'devices_per_node',
 * 'groups', 'links' or 'device')? Borrowed root; NULL-safe. */
struct _MpYamlNode;
gboolean mp_cluster_yaml_is_cluster (const struct _MpYamlNode *root);

/* Zoo: names of the bundled clusters, sorted; caller owns the strv. */
char **mp_cluster_zoo_list (void);

/* Device DEVICE (0 .. world_size-1, node-major) : its node and its node group. */
guint mp_cluster_node_of (const MpCluster *cluster, guint device);
/* The NVLink domain of DEVICE (its node without a domain tier). */
guint mp_cluster_domain_of (const MpCluster *cluster, guint device);
const MpNodeGroup *mp_cluster_group_of (const MpCluster *cluster, guint device);
/* The device a plan's rank 0 is measured against: the slowest (lowest bf16 peak; the fp32
 * peak for a device without bf16). Borrowed. */
const MpDevice *mp_cluster_slowest_device (const MpCluster *cluster);

/* What a group of ranks spans. A placement maps rank r -> device placement[r]; NULL means
 * the identity (rank r on device r). */
typedef struct {
  guint n_ranks;
  guint n_nodes;            /* distinct nodes the group touches */
  guint ranks_per_node;     /* the most group members on one node */
  guint n_domains;          /* distinct domains it touches (= n_nodes without a domain tier) */
  guint ranks_per_domain;   /* the most group members in one domain */
  guint nodes_per_domain;   /* the most of its nodes in one domain (1: it never crosses the
                             * domain tier) */
  MpTier widest;            /* the worst tier crossed (MP_TIER_NODE if all on one node,
                             * MP_TIER_DOMAIN if on several nodes of one domain) */
  /* Bottleneck per tier, for one rank of the group when every device of a node talks at
   * once (all parallel groups of the same kind run together, e.g. the 8 DP groups of a
   * tp=8 plan share the node's NICs): */
  double bw_Bps[MP_TIER_N];
  double latency_s[MP_TIER_N];
} MpGroupSpan;

/* Fills *SPAN for the group of N ranks RANKS under PLACEMENT. Ranks must be < world_size.
 * bw_Bps/latency_s are filled for every tier the cluster has, crossed or not (the cluster
 * tier's over the nodes the group touches), and are 0 for a tier it lacks, which a group
 * can never cross. Cannot fail for valid arguments (checked with g_return_if_fail). */
void mp_cluster_span (const MpCluster *cluster, const guint *placement, const guint *ranks,
                      guint n, MpGroupSpan *span);

/* The worst tier SPAN's counts cross (what mp_cluster_span sets as widest). */
MpTier mp_span_widest (const MpGroupSpan *span);

/* "node", "domain" or "cluster". */
const char *mp_tier_name (MpTier tier);

/* Human-readable summary for `mpplan describe`: devices, nodes, world size, per-device
 * peaks, memory, links (uncalibrated placeholders marked; groups listed when
 * heterogeneous). Caller owns. */
char *mp_cluster_describe_text (const MpCluster *cluster);
/* The same as a JSON object in SI base units (schema_version 1; keys in docs/json.md).
 * Caller owns (json_node_unref). */
JsonNode *mp_cluster_describe_json (const MpCluster *cluster);

G_END_DECLS
