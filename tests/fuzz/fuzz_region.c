/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzz target: an isolated client's region driven by the input. The daemon's
 * steps are datapath/region.c's, with its checks (core/region_check.h): deliver into
 * the rx ring, serve the free ring, serve the tx ring, take a ring back; the
 * client's are whatever the input says, written anywhere in its part, or an
 * honest consumer's. After every step the daemon's own invariants must
 * hold: every rx buffer is either the daemon's (once, on its free stack) or
 * the client's, never both; its rx ring never holds more than a ring; a tx
 * descriptor it takes lies in the client's tx buffers (the copy is made, so
 * that ASan sees any byte outside).
 *
 * Input: a byte of geometry (buffer size), then steps: a byte naming the
 * step, and its bytes.
 */
#include <string.h>

#include "core/region_check.h"
#include "fuzz.h"

#define NBUFS 16u
#define RX_SIZE 8u                     /* rx ring entries */
#define TX_SIZE 4u                     /* tx ring entries, and tx buffers */
#define FREE_SIZE NBUFS
#define FREE_BATCH 6u                  /* buffers taken back at one look (datapath/region.c: 512) */

/* The client's part, as region.c lays it out: consumer line, tx ring, free ring, buffers. */
#define RXC_OFF 0u
#define TX_OFF 64u
#define FREE_OFF (TX_OFF + 128u + TX_SIZE * 16u)
#define TX_BUF_OFF 4096u
/* The daemon's part: the rx ring's descriptors, then the buffers (never written here). */
#define BUF_OFF 8192u

struct step_input {
	const uint8_t *p;
	size_t left;
};

static uint32_t
take(struct step_input *in, unsigned int n)
{
	uint32_t v = 0;

	for (unsigned int i = 0; i < n; i++) {
		v = v << 8 | (in->left > 0 ? *in->p : 0);
		if (in->left > 0) {
			in->p++;
			in->left--;
		}
	}
	return v;
}

static uint32_t
ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void
st32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

struct daemon {
	struct ncd_rc_geom g;
	struct ncd_rc_bufs b;
	uint32_t free_stack[NBUFS];
	uint8_t held[NBUFS];
	uint32_t rx_desc[RX_SIZE];     /* the rx ring's offsets (its part: the client reads them) */
	uint32_t rx_own, rx_seen;      /* its head of the rx ring, the client's tail it took */
	uint32_t tx_own, fr_own;       /* its tails of the tx and free rings */
};

/* The client's tail of the rx ring, taken if it holds up (ncd_region_rx_room()). */
static uint32_t
rx_room(struct daemon *d, const uint8_t *cpart, uint32_t want)
{
	uint32_t room = RX_SIZE - (d->rx_own - d->rx_seen), t;

	if (room >= want)
		return room;
	t = ld32(cpart + RXC_OFF);
	if (ncd_rc_tail_ok(d->rx_seen, d->rx_own, t))
		d->rx_seen = t;
	return RX_SIZE - (d->rx_own - d->rx_seen);
}

static void
deliver(struct daemon *d, const uint8_t *cpart, uint32_t n)
{
	uint32_t room = rx_room(d, cpart, n);

	for (uint32_t i = 0; i < n; i++) {
		if (d->b.nfree == 0)
			continue;                      /* drop_no_buf */
		if (room == 0 && (room = rx_room(d, cpart, 1)) == 0)
			continue;                      /* drop_ring_full */
		uint32_t k = ncd_rc_buf_take(&d->b);

		d->rx_desc[d->rx_own++ % RX_SIZE] = (uint32_t)(d->g.buf_off + k * d->g.buf_size);
		room--;
	}
}

static void
serve_free(struct daemon *d, uint8_t *cpart)
{
	uint32_t n = ncd_rc_avail(d->fr_own, FREE_SIZE, ld32(cpart + FREE_OFF));

	if (n == NCD_RC_BAD)
		return;                                /* bad_index */
	if (n > FREE_BATCH)
		n = FREE_BATCH;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *e = cpart + FREE_OFF + 128 + ((d->fr_own + i) % FREE_SIZE) * 16;

		ncd_rc_buf_return(&d->g, &d->b, ld32(e));
	}
	d->fr_own += n;
	st32(cpart + FREE_OFF + 64, d->fr_own);
}

static void
serve_tx(struct daemon *d, uint8_t *cpart, size_t csize)
{
	uint32_t n = ncd_rc_avail(d->tx_own, TX_SIZE, ld32(cpart + TX_OFF));
	uint8_t frame[4096];

	if (n == NCD_RC_BAD)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct nc_desc dsc;

		memcpy(&dsc, cpart + TX_OFF + 128 + ((d->tx_own + i) % TX_SIZE) * 16, sizeof(dsc));
		if (!ncd_rc_tx_desc_ok(&d->g, &dsc))
			continue;                      /* bad_desc */
		FUZZ_ASSERT(dsc.length <= sizeof(frame));
		FUZZ_ASSERT((uint64_t)dsc.offset + dsc.length <= csize);
		FUZZ_ASSERT(dsc.offset >= TX_BUF_OFF);
		memcpy(frame, cpart + dsc.offset, dsc.length);
	}
	d->tx_own += n;
	st32(cpart + TX_OFF + 64, d->tx_own);
}

/* The channel goes: what its ring holds past the client's tail comes back (ring_put). */
static void
ring_put(struct daemon *d, const uint8_t *cpart)
{
	rx_room(d, cpart, UINT32_MAX);
	for (uint32_t i = d->rx_seen; i != d->rx_own; i++)
		ncd_rc_buf_return(&d->g, &d->b, d->rx_desc[i % RX_SIZE]);
	d->rx_seen = d->rx_own;
}

/* An honest client: it takes what the ring holds and gives every buffer back. */
static void
honest(const struct daemon *d, uint8_t *cpart, uint32_t *fr_head)
{
	uint32_t tail = ld32(cpart + RXC_OFF), room;

	if ((uint32_t)(d->rx_own - tail) > RX_SIZE)
		return;                                /* its tail is garbage: it gives up */
	room = FREE_SIZE - (*fr_head - ld32(cpart + FREE_OFF + 64));
	for (; tail != d->rx_own && room <= FREE_SIZE && room > 0; tail++, room--) {
		st32(cpart + FREE_OFF + 128 + (*fr_head % FREE_SIZE) * 16, d->rx_desc[tail % RX_SIZE]);
		(*fr_head)++;
	}
	st32(cpart + FREE_OFF, *fr_head);
	st32(cpart + RXC_OFF, tail);
}

static void
invariants(const struct daemon *d)
{
	uint8_t on_stack[NBUFS] = { 0 };
	uint32_t held = 0;

	FUZZ_ASSERT(d->b.nfree <= NBUFS);
	for (uint32_t i = 0; i < d->b.nfree; i++) {
		uint32_t k = d->b.free[i];

		FUZZ_ASSERT(k < NBUFS);
		FUZZ_ASSERT(!on_stack[k]);             /* never handed out twice */
		FUZZ_ASSERT(!d->held[k]);              /* never the daemon's and the client's */
		on_stack[k] = 1;
	}
	for (uint32_t k = 0; k < NBUFS; k++)
		held += d->held[k];
	FUZZ_ASSERT(held + d->b.nfree == NBUFS);       /* none lost */
	FUZZ_ASSERT((uint32_t)(d->rx_own - d->rx_seen) <= RX_SIZE);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t sizes[] = { 256, 384, 1024, 1088 };
	struct step_input in = { data, size };
	struct daemon d;
	uint32_t fr_head = 0;
	uint32_t buf_size = sizes[take(&in, 1) % 4];
	size_t csize = TX_BUF_OFF + (size_t)TX_SIZE * buf_size;
	uint8_t cpart[TX_BUF_OFF + TX_SIZE * 1088];

	memset(&d, 0, sizeof(d));
	memset(cpart, 0, sizeof(cpart));
	ncd_rc_geom_init(&d.g, BUF_OFF, TX_BUF_OFF, buf_size, NBUFS, TX_SIZE);
	d.b = (struct ncd_rc_bufs){ .free = d.free_stack, .nfree = NBUFS, .held = d.held };
	for (uint32_t i = 0; i < NBUFS; i++)
		d.free_stack[i] = NBUFS - 1 - i;
	while (in.left > 0) {
		switch (take(&in, 1) % 6) {
		case 0:
			deliver(&d, cpart, take(&in, 1) % 10);
			break;
		case 1:
			serve_free(&d, cpart);
			break;
		case 2:
			serve_tx(&d, cpart, csize);
			break;
		case 3: { /* the client writes anything anywhere in its part */
			uint32_t off = take(&in, 2) % csize, len = take(&in, 1) % 17;

			for (uint32_t i = 0; i < len && off + i < csize; i++)
				cpart[off + i] = (uint8_t)take(&in, 1);
			break;
		}
		case 4:
			honest(&d, cpart, &fr_head);
			break;
		default:
			ring_put(&d, cpart);
			break;
		}
		invariants(&d);
	}
	return 0;
}
