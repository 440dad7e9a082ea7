// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The CC core as a host shared library, for tests and the simulator. */
#include <stddef.h>

#include "cc_event.h"

size_t cc_state_size(void) { return sizeof(struct cc_qp_state); }
size_t cc_params_size(void) { return sizeof(struct dcqcn_params); }
size_t cc_event_size(void) { return sizeof(struct cc_event); }

/* Apply n events in order to one state; when trace is not NULL, store the
 * state after each event in trace[i]. */
void cc_apply_events(const struct dcqcn_params *p, struct cc_qp_state *st,
		     const struct cc_event *events, size_t n, struct cc_qp_state *trace)
{
	for (size_t i = 0; i < n; i++) {
		cc_apply_event(st, p, &events[i]);
		if (trace)
			trace[i] = *st;
	}
}

/* One event each for n independent states (a simulator's QPs). */
void cc_apply_each(const struct dcqcn_params *p, struct cc_qp_state *states,
		   const struct cc_event *events, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cc_apply_event(&states[i], p, &events[i]);
}

/* n events in order, event i to states[qp[i]]: a simulator's QPs driven
 * from one time-ordered event array, no gathering of states into event
 * order (numpy's fancy indexing did that at 1.7 M events/s). */
void cc_apply_indexed(const struct dcqcn_params *p, struct cc_qp_state *states,
		      const struct cc_event *events, const unsigned int *qp, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cc_apply_event(&states[qp[i]], p, &events[i]);
}
