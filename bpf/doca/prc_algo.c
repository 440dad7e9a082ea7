// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The PRC adapter for DOCA PCC (BlueField-3 DPA): the firmware's
 * callbacks drive the same CC core as the emulator's BPF programs.
 *  - doca_pcc_dev_user_algo: one event of one flow. CNP and TX events go
 *    to the core as they are (TX counts in 32-byte units, the emulator's
 *    unit too); ACK, NACK and RTT events, when enabled, only bring the
 *    rate up to date. The flow's context is the core's per-QP state.
 *  - doca_pcc_dev_user_init: registers the algorithm, its parameters by
 *    the firmware's DCQCN names and its counters, on every port.
 *  - doca_pcc_dev_user_set_algo_params: takes new values within range.
 *  - doca_pcc_dev_user_mailbox_handle: process hooks and QP bindings
 *    from the host (prc_mailbox.h).
 * Compiles against the SDK (PRC_DOCA_SDK) or, for CI and the host
 * harness, against doca_pcc_decl.h.
 */
#include "doca_pcc_decl.h"

#include "../cc/cc.h"
#include "prc_mailbox.h"
#include "prc_time.h"

#define PRC_ALGO_INDEX 0u
#define PRC_ALGO_SLOT 0u
#define PRC_ALGO_ID 0x505243u			/* "PRC" */
#define PRC_PARAMS (sizeof(struct dcqcn_params) / sizeof(cc_u32))

_Static_assert(sizeof(doca_pcc_dev_algo_ctxt_t) == sizeof(struct cc_qp_state),
	       "a flow's context is the core's per-QP state");
_Static_assert(DOCA_PCC_DEV_MAX_RATE == CC_RATE_ONE, "the rate limiter and the core share a fixed point");
_Static_assert(PRC_PARAMS <= DOCA_PCC_DEV_MAX_NUM_PARAMS_PER_ALGO, "every DCQCN parameter registers");

struct prc_param_info {
	const char *desc;
	cc_u32 dflt, min, max;
};

/* In struct dcqcn_params order: the param array is read as that struct.
 * Defaults are the firmware's DCQCN defaults on a 100 Gb/s port, in the
 * core's units (rates in 2^-20 of line rate, times in ns). */
static const struct prc_param_info prc_params[] = {
	{ "rpg_time_reset: rate-increase timer, ns", 300000, 1, 0xffffffffu },
	{ "rpg_byte_reset: bytes per byte-counter event, 0 off", 32767, 0, 0x7fffffffu },
	{ "rpg_threshold: F, fast-recovery steps", 1, 1, 31 },
	{ "rpg_ai_rate: additive step, 2^-20 of line", 52, 0, CC_RATE_ONE },
	{ "rpg_hai_rate: hyper step, 2^-20 of line", 524, 0, CC_RATE_ONE },
	{ "rpg_gd: cut = alpha / 2^(rpg_gd - 10)", 11, 10, 20 },
	{ "rpg_min_dec_fac: a cut keeps at least this percent", 50, 0, 100 },
	{ "rpg_min_rate: 2^-20 of line", 10, 0, CC_RATE_ONE },
	{ "dce_tcp_g: alpha keeps g/1024 per period", 1019, 0, 1024 },
	{ "dce_tcp_rtt: alpha period, ns", 1000, 1, PRC_ALPHA_PERIOD_MAX_NS },
	{ "rate_reduce_monitor_period: ns between cuts", 4000, 0, 0xffffffffu },
	{ "initial_alpha_value: 1023 = 1023/1024", 1023, 0, 1024 },
	{ "w_min: PRC weight floor, 1024 = 1", 256, 1, CC_WEIGHT_ONE },
	{ "w_max: PRC weight ceiling, 1024 = 1", 4096, CC_WEIGHT_ONE, PRC_MAILBOX_WEIGHT_MAX },
};
_Static_assert(sizeof(prc_params) / sizeof(prc_params[0]) == PRC_PARAMS, "one entry per parameter");

enum prc_counter {
	PRC_COUNT_CNP,			/* CNP events */
	PRC_COUNT_TX,			/* TX events */
	PRC_COUNT_OTHER,		/* ACK, NACK, RTT and others: rate brought up to date */
	PRC_COUNT_UNBOUND,		/* events of flows with no process: weight 1 */
	PRC_COUNTERS
};

static const char *const prc_counter_desc[PRC_COUNTERS] = {
	"CNP events", "TX events", "other events", "events of flows bound to no process",
};

static const char prc_algo_desc[] = "DCQCN with PRC's per-process hook (prc-emu)";

/* Device-wide: the mailbox's hooks and QP bindings, the flow-tag cache. */
static struct prc_mailbox_state prc_mailbox;
static struct prc_flow_entry prc_flows[PRC_FLOW_CACHE];
static const struct prc_hook prc_no_hook;	/* weight 1, no floor or cap: plain DCQCN */

static cc_u64 prc_addr(const void *p)
{
	return (cc_u64)(unsigned long)p;
}

static cc_u32 prc_strlen(const char *s)
{
	cc_u32 n = 0;

	while (s[n])
		n++;
	return n + 1;			/* with its terminator */
}

void doca_pcc_dev_user_init(uint32_t *disable_event_bitmask)
{
	struct doca_pcc_dev_algo_meta_data meta = {
		.algo_id = PRC_ALGO_ID, .algo_major_version = 1, .algo_minor_version = 0,
		.algo_desc_size = sizeof(prc_algo_desc), .algo_desc_addr = prc_addr(prc_algo_desc),
	};
	cc_u32 i, port;

	doca_pcc_dev_algo_init_metadata(PRC_ALGO_INDEX, &meta, PRC_PARAMS, PRC_COUNTERS);
	for (i = 0; i < PRC_PARAMS; i++)
		doca_pcc_dev_algo_init_param(PRC_ALGO_INDEX, i, prc_params[i].dflt, prc_params[i].max,
					     prc_params[i].min, 1, prc_strlen(prc_params[i].desc),
					     prc_addr(prc_params[i].desc));
	for (i = 0; i < PRC_COUNTERS; i++)
		doca_pcc_dev_algo_init_counter(PRC_ALGO_INDEX, i, 0xffffffffu, 1, prc_strlen(prc_counter_desc[i]),
					       prc_addr(prc_counter_desc[i]));
	for (port = 0; port < DOCA_PCC_DEV_MAX_NUM_PORTS; port++)
		doca_pcc_dev_init_algo_slot(port, PRC_ALGO_SLOT, PRC_ALGO_INDEX, 1);
	/* DCQCN reacts to CNPs and counts sent bytes: the rest costs DPA time for nothing */
	*disable_event_bitmask = (1u << DOCA_PCC_DEV_EVNT_ROCE_ACK) | (1u << DOCA_PCC_DEV_EVNT_ROCE_NACK) |
				 (1u << DOCA_PCC_DEV_EVNT_RTT);
}

static void prc_count(uint32_t *counters, enum prc_counter which)
{
	if (counters)			/* counters may be off (PPCC counter_en) */
		counters[which]++;
}

void doca_pcc_dev_user_algo(doca_pcc_dev_algo_ctxt_t *algo_ctxt, doca_pcc_dev_event_t *event,
			    const doca_pcc_dev_attr_t *attr, doca_pcc_dev_results_t *results)
{
	doca_pcc_dev_event_general_attr_t ev = doca_pcc_dev_get_ev_attr(event);
	struct cc_qp_state *st = (struct cc_qp_state *)algo_ctxt->data;
	const struct dcqcn_params *p;
	uint32_t *counters;
	cc_u32 kind = CC_EV_ADVANCE, bytes = 0, proc, is_tx = ev.ev_type == DOCA_PCC_DEV_EVNT_ROCE_TX;
	cc_u64 now;

	if (attr->algo_slot != PRC_ALGO_SLOT) {
		doca_pcc_dev_default_internal_algo(algo_ctxt, event, attr, results);
		return;
	}
	p = (const struct dcqcn_params *)doca_pcc_dev_get_algo_params(ev.port_num, attr->algo_slot);
	counters = doca_pcc_dev_get_counters(ev.port_num, attr->algo_slot);
	now = prc_time_extend(st, doca_pcc_dev_get_timestamp(event));
	proc = prc_flow_proc(prc_flows, &prc_mailbox.qps, doca_pcc_dev_get_flowtag(event), is_tx,
			     is_tx ? doca_pcc_dev_get_flow_qpn(event) : 0);
	if (is_tx) {
		kind = CC_EV_TX;
		bytes = doca_pcc_dev_get_roce_tx_cntrs(event).sent_32bytes * 32u;
		prc_count(counters, PRC_COUNT_TX);
	} else if (ev.ev_type == DOCA_PCC_DEV_EVNT_ROCE_CNP) {
		kind = CC_EV_CNP;
		prc_count(counters, PRC_COUNT_CNP);
	} else {
		prc_count(counters, PRC_COUNT_OTHER);
	}
	if (proc == PRC_NO_PROC)
		prc_count(counters, PRC_COUNT_UNBOUND);
	cc_on_event(st, p, proc == PRC_NO_PROC ? &prc_no_hook : &prc_mailbox.hooks[proc], kind, bytes, now);
	results->rate = st->common.rc;
	results->rtt_req = 0;
}

doca_pcc_dev_error_t doca_pcc_dev_user_set_algo_params(uint32_t port_num, uint32_t algo_slot,
						       uint32_t param_id_base, uint32_t param_num,
						       const uint32_t *new_param_values, uint32_t *params)
{
	cc_u32 i, id;

	(void)port_num;
	if (algo_slot != PRC_ALGO_SLOT || param_id_base > PRC_PARAMS || param_num > PRC_PARAMS - param_id_base)
		return DOCA_PCC_DEV_STATUS_FAIL;
	for (i = 0; i < param_num; i++) {	/* all within range, or none taken */
		id = param_id_base + i;
		if (new_param_values[i] < prc_params[id].min || new_param_values[i] > prc_params[id].max)
			return DOCA_PCC_DEV_STATUS_FAIL;
	}
	for (i = 0; i < param_num; i++)
		params[param_id_base + i] = new_param_values[i];
	return DOCA_PCC_DEV_STATUS_OK;
}

/* The response: u32 status, messages taken, messages refused, last seq. */
doca_pcc_dev_error_t doca_pcc_dev_user_mailbox_handle(void *request, uint32_t request_size,
						      uint32_t max_response_size, void *response,
						      uint32_t *response_size)
{
	enum prc_mailbox_status status = prc_mailbox_apply(&prc_mailbox, request, request_size);
	cc_u32 reply[4] = { status, prc_mailbox.taken, prc_mailbox.errors, prc_mailbox.last_seq };
	unsigned char *out = response;
	cc_u32 i;

	*response_size = 0;
	if (max_response_size >= sizeof(reply)) {
		for (i = 0; i < sizeof(reply); i++)	/* little-endian, any alignment */
			out[i] = (unsigned char)(reply[i / 4] >> (8 * (i % 4)));
		*response_size = sizeof(reply);
	}
	return status == PRC_MAILBOX_OK ? DOCA_PCC_DEV_STATUS_OK : DOCA_PCC_DEV_STATUS_FAIL;
}

#ifdef PRC_DOCA_HOST
/* The host harness reads the device's tables and starts it afresh. */
const struct prc_mailbox_state *prc_host_mailbox_state(void) { return &prc_mailbox; }
unsigned long prc_host_mailbox_state_size(void) { return sizeof(prc_mailbox); }
cc_u32 prc_host_qp_proc(cc_u32 qpn) { return prc_qp_proc(&prc_mailbox.qps, qpn); }

void prc_host_reset(void)
{
	cc_u32 i;

	prc_mailbox = (struct prc_mailbox_state){ 0 };
	for (i = 0; i < PRC_FLOW_CACHE; i++)
		prc_flows[i] = (struct prc_flow_entry){ 0 };
}
#endif
