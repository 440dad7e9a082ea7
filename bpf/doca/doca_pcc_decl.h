/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The DOCA PCC device types and calls the PRC adapter uses, declared from
 * the public API documentation, so the adapter compiles (gcc -Wall
 * -Werror in CI) and runs in the host harness without the SDK. A device
 * build defines PRC_DOCA_SDK and takes the SDK's own headers instead;
 * there the accessors are inline functions over the real event layout.
 * Here the event is opaque: the host harness (doca_host.c) defines it and
 * the accessors.
 */
#ifndef PRC_DOCA_PCC_DECL_H
#define PRC_DOCA_PCC_DECL_H

#ifdef PRC_DOCA_SDK
#include <doca_pcc_dev.h>
#include <doca_pcc_dev_event.h>
#include <doca_pcc_dev_algo_access.h>
#else
#include <stdint.h>

typedef enum {
	DOCA_PCC_DEV_STATUS_OK = 0,
	DOCA_PCC_DEV_STATUS_FAIL = 1,
} doca_pcc_dev_error_t;

/* event types (ev_type) */
enum {
	DOCA_PCC_DEV_EVNT_NULL = 0,
	DOCA_PCC_DEV_EVNT_FW = 1,
	DOCA_PCC_DEV_EVNT_ROCE_CNP = 2,
	DOCA_PCC_DEV_EVNT_ROCE_TX = 3,
	DOCA_PCC_DEV_EVNT_ROCE_ACK = 4,
	DOCA_PCC_DEV_EVNT_ROCE_NACK = 5,
	DOCA_PCC_DEV_EVNT_RTT = 6,
};

#define DOCA_PCC_DEV_MAX_RATE (1u << 20)	/* the rate limiter's fixed point: line rate */
#define DOCA_PCC_DEV_MAX_NUM_PORTS 4
#define DOCA_PCC_DEV_MAX_NUM_PARAMS_PER_ALGO 0x1e
#define DOCA_PCC_DEV_MAX_NUM_COUNTERS_PER_ALGO 0xf

typedef struct doca_pcc_dev_event doca_pcc_dev_event_t;	/* opaque */

/* a flow's context: 48 bytes the device keeps between its events */
typedef struct {
	uint32_t data[12];
} doca_pcc_dev_algo_ctxt_t;

typedef struct {
	uint32_t algo_slot;
} doca_pcc_dev_attr_t;

typedef struct {
	uint32_t rate;			/* DOCA_PCC_DEV_MAX_RATE is line rate */
	uint32_t rtt_req;		/* 1: send an RTT probe */
} doca_pcc_dev_results_t;

typedef struct {
	uint32_t ev_type;
	uint32_t ev_subtype;
	uint32_t port_num;
	uint32_t flags;
} doca_pcc_dev_event_general_attr_t;

typedef struct {
	uint32_t sent_32bytes;		/* 16 bits on the device: clips at 2 MB per event */
	uint32_t sent_pkts;
} doca_pcc_dev_roce_tx_cntrs_t;

struct doca_pcc_dev_algo_meta_data {
	uint32_t algo_id;
	uint32_t algo_major_version;
	uint32_t algo_minor_version;
	uint32_t algo_desc_size;
	uint64_t algo_desc_addr;
};

doca_pcc_dev_event_general_attr_t doca_pcc_dev_get_ev_attr(doca_pcc_dev_event_t *event);
uint32_t doca_pcc_dev_get_timestamp(doca_pcc_dev_event_t *event);
uint32_t doca_pcc_dev_get_flowtag(doca_pcc_dev_event_t *event);
uint32_t doca_pcc_dev_get_flow_qpn(doca_pcc_dev_event_t *event);	/* BlueField-3: TX events only */
doca_pcc_dev_roce_tx_cntrs_t doca_pcc_dev_get_roce_tx_cntrs(doca_pcc_dev_event_t *event);

uint32_t *doca_pcc_dev_get_algo_params(uint32_t port_num, uint32_t algo_slot);
uint32_t *doca_pcc_dev_get_counters(uint32_t port_num, uint32_t algo_slot);
doca_pcc_dev_error_t doca_pcc_dev_algo_init_metadata(uint32_t algo_idx,
						     const struct doca_pcc_dev_algo_meta_data *user_def,
						     uint32_t param_num, uint32_t counter_num);
doca_pcc_dev_error_t doca_pcc_dev_algo_init_param(uint32_t algo_idx, uint32_t param_id, uint32_t default_value,
						  uint32_t max_value, uint32_t min_value, uint32_t permissions,
						  uint32_t param_desc_size, uint64_t param_desc_addr);
doca_pcc_dev_error_t doca_pcc_dev_algo_init_counter(uint32_t algo_idx, uint32_t counter_id, uint32_t max_value,
						    uint32_t permissions, uint32_t counter_desc_size,
						    uint64_t counter_desc_addr);
doca_pcc_dev_error_t doca_pcc_dev_init_algo_slot(uint32_t portid, uint32_t algo_slot, uint32_t algo_idx,
						 uint32_t algo_en);
void doca_pcc_dev_default_internal_algo(doca_pcc_dev_algo_ctxt_t *algo_ctxt, doca_pcc_dev_event_t *event,
					const doca_pcc_dev_attr_t *attr, doca_pcc_dev_results_t *results);

/* what the adapter defines and the firmware calls */
void doca_pcc_dev_user_init(uint32_t *disable_event_bitmask);
void doca_pcc_dev_user_algo(doca_pcc_dev_algo_ctxt_t *algo_ctxt, doca_pcc_dev_event_t *event,
			    const doca_pcc_dev_attr_t *attr, doca_pcc_dev_results_t *results);
doca_pcc_dev_error_t doca_pcc_dev_user_set_algo_params(uint32_t port_num, uint32_t algo_slot,
						       uint32_t param_id_base, uint32_t param_num,
						       const uint32_t *new_param_values, uint32_t *params);
doca_pcc_dev_error_t doca_pcc_dev_user_mailbox_handle(void *request, uint32_t request_size,
						      uint32_t max_response_size, void *response,
						      uint32_t *response_size);
#endif /* PRC_DOCA_SDK */

#endif /* PRC_DOCA_PCC_DECL_H */
