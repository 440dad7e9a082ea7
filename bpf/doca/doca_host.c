// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The host harness: the DOCA PCC library calls the adapter makes, over a
 * plain event struct, and a replay entry that feeds recorded events
 * through doca_pcc_dev_user_algo as the firmware would (built with
 * prc_algo.c and -DPRC_DOCA_HOST; dataplane/doca_device.py drives it).
 * Registration is kept as the firmware would keep it: parameter defaults
 * and ranges per algorithm, a parameter and counter array per port and
 * slot.
 */
#include <stddef.h>
#include <string.h>

#include "doca_pcc_decl.h"

#define HOST_SLOTS 8
#define HOST_ALGOS 8

struct doca_pcc_dev_event {
	uint32_t ev_type;
	uint32_t port_num;
	uint32_t timestamp;		/* 32-bit ns */
	uint32_t flowtag;
	uint32_t qpn;			/* TX events */
	uint32_t sent_32bytes;		/* TX events */
};

struct host_param {
	uint32_t dflt, max, min, registered;
};

static struct host_param host_param_info[HOST_ALGOS][DOCA_PCC_DEV_MAX_NUM_PARAMS_PER_ALGO];
static uint32_t host_param_num[HOST_ALGOS], host_counter_num[HOST_ALGOS];
static uint32_t host_params[DOCA_PCC_DEV_MAX_NUM_PORTS][HOST_SLOTS][DOCA_PCC_DEV_MAX_NUM_PARAMS_PER_ALGO];
static uint32_t host_counters[DOCA_PCC_DEV_MAX_NUM_PORTS][HOST_SLOTS][DOCA_PCC_DEV_MAX_NUM_COUNTERS_PER_ALGO];
static uint32_t host_slot_algo[DOCA_PCC_DEV_MAX_NUM_PORTS][HOST_SLOTS];

doca_pcc_dev_event_general_attr_t doca_pcc_dev_get_ev_attr(doca_pcc_dev_event_t *event)
{
	doca_pcc_dev_event_general_attr_t a = { .ev_type = event->ev_type, .port_num = event->port_num };

	return a;
}

uint32_t doca_pcc_dev_get_timestamp(doca_pcc_dev_event_t *event) { return event->timestamp; }
uint32_t doca_pcc_dev_get_flowtag(doca_pcc_dev_event_t *event) { return event->flowtag; }
uint32_t doca_pcc_dev_get_flow_qpn(doca_pcc_dev_event_t *event) { return event->qpn; }

doca_pcc_dev_roce_tx_cntrs_t doca_pcc_dev_get_roce_tx_cntrs(doca_pcc_dev_event_t *event)
{
	doca_pcc_dev_roce_tx_cntrs_t c = { .sent_32bytes = event->sent_32bytes & 0xffff, .sent_pkts = 1 };

	return c;
}

uint32_t *doca_pcc_dev_get_algo_params(uint32_t port_num, uint32_t algo_slot)
{
	return host_params[port_num % DOCA_PCC_DEV_MAX_NUM_PORTS][algo_slot % HOST_SLOTS];
}

uint32_t *doca_pcc_dev_get_counters(uint32_t port_num, uint32_t algo_slot)
{
	return host_counters[port_num % DOCA_PCC_DEV_MAX_NUM_PORTS][algo_slot % HOST_SLOTS];
}

doca_pcc_dev_error_t doca_pcc_dev_algo_init_metadata(uint32_t algo_idx,
						     const struct doca_pcc_dev_algo_meta_data *user_def,
						     uint32_t param_num, uint32_t counter_num)
{
	if (algo_idx >= HOST_ALGOS || !user_def || param_num > DOCA_PCC_DEV_MAX_NUM_PARAMS_PER_ALGO ||
	    counter_num > DOCA_PCC_DEV_MAX_NUM_COUNTERS_PER_ALGO)
		return DOCA_PCC_DEV_STATUS_FAIL;
	host_param_num[algo_idx] = param_num;
	host_counter_num[algo_idx] = counter_num;
	return DOCA_PCC_DEV_STATUS_OK;
}

doca_pcc_dev_error_t doca_pcc_dev_algo_init_param(uint32_t algo_idx, uint32_t param_id, uint32_t default_value,
						  uint32_t max_value, uint32_t min_value, uint32_t permissions,
						  uint32_t param_desc_size, uint64_t param_desc_addr)
{
	(void)permissions;
	if (algo_idx >= HOST_ALGOS || param_id >= host_param_num[algo_idx] || min_value > max_value ||
	    default_value < min_value || default_value > max_value || !param_desc_size || !param_desc_addr)
		return DOCA_PCC_DEV_STATUS_FAIL;
	host_param_info[algo_idx][param_id] = (struct host_param){ default_value, max_value, min_value, 1 };
	return DOCA_PCC_DEV_STATUS_OK;
}

doca_pcc_dev_error_t doca_pcc_dev_algo_init_counter(uint32_t algo_idx, uint32_t counter_id, uint32_t max_value,
						    uint32_t permissions, uint32_t counter_desc_size,
						    uint64_t counter_desc_addr)
{
	(void)max_value;
	(void)permissions;
	if (algo_idx >= HOST_ALGOS || counter_id >= host_counter_num[algo_idx] || !counter_desc_size ||
	    !counter_desc_addr)
		return DOCA_PCC_DEV_STATUS_FAIL;
	return DOCA_PCC_DEV_STATUS_OK;
}

/* The slot's parameters start at the registered defaults. */
doca_pcc_dev_error_t doca_pcc_dev_init_algo_slot(uint32_t portid, uint32_t algo_slot, uint32_t algo_idx,
						 uint32_t algo_en)
{
	uint32_t i;

	if (portid >= DOCA_PCC_DEV_MAX_NUM_PORTS || algo_slot >= HOST_SLOTS || algo_idx >= HOST_ALGOS || !algo_en)
		return DOCA_PCC_DEV_STATUS_FAIL;
	for (i = 0; i < host_param_num[algo_idx]; i++) {
		if (!host_param_info[algo_idx][i].registered)
			return DOCA_PCC_DEV_STATUS_FAIL;
		host_params[portid][algo_slot][i] = host_param_info[algo_idx][i].dflt;
	}
	memset(host_counters[portid][algo_slot], 0, sizeof(host_counters[portid][algo_slot]));
	host_slot_algo[portid][algo_slot] = algo_idx + 1;
	return DOCA_PCC_DEV_STATUS_OK;
}

/* Slots the adapter does not serve: the firmware's own algorithm, which
 * the harness never runs; line rate marks that it was called. */
void doca_pcc_dev_default_internal_algo(doca_pcc_dev_algo_ctxt_t *algo_ctxt, doca_pcc_dev_event_t *event,
					const doca_pcc_dev_attr_t *attr, doca_pcc_dev_results_t *results)
{
	(void)algo_ctxt;
	(void)event;
	(void)attr;
	results->rate = DOCA_PCC_DEV_MAX_RATE;
	results->rtt_req = 0;
}

/* ---- the harness's entry points ---- */

/* One recorded event for replay: flow indexes the contexts array. */
struct host_replay_event {
	uint32_t flow;
	uint32_t ev_type;
	uint32_t port_num;
	uint32_t timestamp;
	uint32_t flowtag;
	uint32_t qpn;
	uint32_t sent_32bytes;
	uint32_t algo_slot;
};

void prc_host_reset(void);		/* prc_algo.c's tables, zeroed */

uint32_t prc_host_init(void)
{
	uint32_t mask = 0;

	prc_host_reset();
	memset(host_params, 0, sizeof(host_params));
	memset(host_counters, 0, sizeof(host_counters));
	memset(host_slot_algo, 0, sizeof(host_slot_algo));
	doca_pcc_dev_user_init(&mask);
	return mask;
}

/* Whether init registered and enabled an algorithm on (port, slot). */
int prc_host_slot_ready(uint32_t port, uint32_t slot)
{
	return port < DOCA_PCC_DEV_MAX_NUM_PORTS && slot < HOST_SLOTS && host_slot_algo[port][slot] != 0;
}

/* n events in order through doca_pcc_dev_user_algo; the rate each left,
 * and (when states is not NULL) the flow's context after it. */
void prc_host_replay(const struct host_replay_event *events, size_t n, doca_pcc_dev_algo_ctxt_t *contexts,
		     uint32_t *rates, doca_pcc_dev_algo_ctxt_t *states)
{
	struct doca_pcc_dev_event ev;
	doca_pcc_dev_attr_t attr;
	doca_pcc_dev_results_t res;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct host_replay_event *e = &events[i];

		ev = (struct doca_pcc_dev_event){ e->ev_type, e->port_num, e->timestamp, e->flowtag, e->qpn,
						  e->sent_32bytes };
		attr.algo_slot = e->algo_slot;
		res.rate = res.rtt_req = 0;
		doca_pcc_dev_user_algo(&contexts[e->flow], &ev, &attr, &res);
		rates[i] = res.rate;
		if (states)
			states[i] = contexts[e->flow];
	}
}

/* What the firmware does with a PPCC parameter write. */
int prc_host_set_params(uint32_t port, uint32_t slot, uint32_t base, uint32_t num, const uint32_t *values)
{
	return doca_pcc_dev_user_set_algo_params(port, slot, base, num, values,
						 doca_pcc_dev_get_algo_params(port, slot));
}

int prc_host_mailbox(void *request, uint32_t size, void *response, uint32_t max_response, uint32_t *response_size)
{
	return doca_pcc_dev_user_mailbox_handle(request, size, max_response, response, response_size);
}
