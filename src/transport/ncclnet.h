/*
 * ncclnet.h - the "plugin" transport (ncclnet.c, ncclnet_data.c): an external NCCL net plugin
 * used as one of rcoll's network transports.  Its knob and the layout of its handle, shared
 * with the tests.
 */
#ifndef RCOLL_TRANSPORT_NCCLNET_H
#define RCOLL_TRANSPORT_NCCLNET_H

#include <stdint.h>
#include "transport/transport.h"
#include "util/config.h"

/* The transport's knob: RCOLL_NET_PLUGIN, a plugin name or path ("" = none). */
typedef struct {
    char plugin[RCOLL_CFG_STR_MAX];
} rcoll_ncclnet_config_t;
extern const rcoll_config_table_t rcoll_ncclnet_config_table;

/* rcoll's handle for a plugin's listen: a mark (the handle rule of transport.h: a foreign
 * handle may begin with zeros), then the first bytes of the plugin's own handle.  A plugin
 * whose listen writes a non-zero byte past RCOLL_NCCLNET_PLUGIN_HANDLE is refused. */
#define RCOLL_NCCLNET_HANDLE_MAGIC 0x67706c74656e6372ull /* "rcnetplg" in memory order */
#define RCOLL_NCCLNET_PLUGIN_HANDLE (RCOLL_TRANSPORT_HANDLE_BYTES - 8)

#endif
