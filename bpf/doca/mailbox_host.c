// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The mailbox's device-side logic built for the host: the tests and the
 * host harness drive the same C the DOCA adapter compiles. */
#include <stddef.h>

#include "prc_mailbox.h"

size_t prc_mailbox_state_size(void) { return sizeof(struct prc_mailbox_state); }

int prc_mailbox_handle(struct prc_mailbox_state *s, const unsigned char *msg, unsigned int len)
{
	return (int)prc_mailbox_apply(s, msg, len);
}
