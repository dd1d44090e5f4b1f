/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The checks of what an isolated client writes in its region
 * (core/region_check.h), rule by rule: a buffer's offset, the indexes of
 * the rings each side produces, the buffers given back, the descriptors
 * sent. No EAL: these are the functions the workers call.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "core/region_check.h"

/* A region of 8 rx buffers and 4 tx ones, the way the daemon lays it out. */
#define BUF_OFF 0x10000u
#define TX_BUF_OFF 0x3000u
#define NBUFS 8u
#define NTX 4u

static struct ncd_rc_geom
geom(uint32_t buf_size)
{
	struct ncd_rc_geom g;

	ncd_rc_geom_init(&g, BUF_OFF, TX_BUF_OFF, buf_size, NBUFS, NTX);
	return g;
}

START_TEST(rx_buffer_offsets)
{
	/* A power of two (the shift) and not (the division): the same answers. */
	static const uint32_t sizes[] = { 2048, 3072 };

	for (unsigned int k = 0; k < 2; k++) {
		struct ncd_rc_geom g = geom(sizes[k]);
		uint32_t sz = sizes[k];

		ck_assert_uint_eq(g.buf_shift, sz == 2048 ? 11 : 0);
		for (uint32_t i = 0; i < NBUFS; i++)
			ck_assert_uint_eq(ncd_rc_rx_buf(&g, BUF_OFF + i * sz), i);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, BUF_OFF + NBUFS * sz), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, BUF_OFF + sz + 1), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, BUF_OFF + 2 * sz - 1), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, BUF_OFF - sz), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, 0), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, TX_BUF_OFF), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_rx_buf(&g, UINT32_MAX), NCD_RC_BAD);
	}
}
END_TEST

START_TEST(rx_tail_moves_forward_up_to_the_head)
{
	/* seen: the last tail taken; own: the daemon's head. Across the 32-bit wrap too. */
	static const uint32_t bases[] = { 0, 1000, UINT32_MAX - 2 };

	for (unsigned int k = 0; k < 3; k++) {
		uint32_t seen = bases[k], own = seen + 5;

		for (uint32_t d = 0; d <= 5; d++)
			ck_assert(ncd_rc_tail_ok(seen, own, seen + d));
		ck_assert(!ncd_rc_tail_ok(seen, own, own + 1));
		ck_assert(!ncd_rc_tail_ok(seen, own, seen - 1));
		ck_assert(!ncd_rc_tail_ok(seen, own, seen + 0x80000000u));
		/* Nothing produced since: only the same tail. */
		ck_assert(ncd_rc_tail_ok(own, own, own));
		ck_assert(!ncd_rc_tail_ok(own, own, own + 1));
		ck_assert(!ncd_rc_tail_ok(own, own, own - 1));
	}
}
END_TEST

START_TEST(client_head_at_most_a_ring_ahead)
{
	static const uint32_t bases[] = { 0, 77, UINT32_MAX - 1 };

	for (unsigned int k = 0; k < 3; k++) {
		uint32_t own = bases[k];

		for (uint32_t d = 0; d <= 16; d++)
			ck_assert_uint_eq(ncd_rc_avail(own, 16, own + d), d);
		ck_assert_uint_eq(ncd_rc_avail(own, 16, own + 17), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_avail(own, 16, own - 1), NCD_RC_BAD);
		ck_assert_uint_eq(ncd_rc_avail(own, 16, own + 0x80000000u), NCD_RC_BAD);
	}
}
END_TEST

START_TEST(buffers_go_round_and_bad_returns_change_nothing)
{
	struct ncd_rc_geom g = geom(2048);
	uint32_t free_stack[NBUFS], taken[NBUFS];
	uint8_t held[NBUFS] = { 0 };
	struct ncd_rc_bufs b = { .free = free_stack, .nfree = NBUFS, .held = held };

	for (uint32_t i = 0; i < NBUFS; i++)
		free_stack[i] = NBUFS - 1 - i;
	for (uint32_t i = 0; i < NBUFS; i++) {
		taken[i] = ncd_rc_buf_take(&b);
		ck_assert_uint_eq(taken[i], i);
		ck_assert_uint_eq(held[i], 1);
	}
	ck_assert_uint_eq(b.nfree, 0);
	/* Not a buffer's start, out of the area, the header: refused, nothing moves. */
	ck_assert(!ncd_rc_buf_return(&g, &b, BUF_OFF + 1));
	ck_assert(!ncd_rc_buf_return(&g, &b, BUF_OFF + NBUFS * 2048));
	ck_assert(!ncd_rc_buf_return(&g, &b, 0));
	ck_assert(!ncd_rc_buf_return(&g, &b, TX_BUF_OFF));
	ck_assert_uint_eq(b.nfree, 0);
	/* A held one comes back once; the second time it is not the client's. */
	ck_assert(ncd_rc_buf_return(&g, &b, BUF_OFF + 3 * 2048));
	ck_assert(!ncd_rc_buf_return(&g, &b, BUF_OFF + 3 * 2048));
	ck_assert_uint_eq(b.nfree, 1);
	ck_assert_uint_eq(held[3], 0);
	/* ... and is the next one handed out. */
	ck_assert_uint_eq(ncd_rc_buf_take(&b), 3);
	for (uint32_t i = 0; i < NBUFS; i++)
		ck_assert(ncd_rc_buf_return(&g, &b, BUF_OFF + i * 2048));
	ck_assert_uint_eq(b.nfree, NBUFS);
	for (uint32_t i = 0; i < NBUFS; i++)
		ck_assert_uint_eq(held[i], 0);
}
END_TEST

START_TEST(tx_descriptors)
{
	struct ncd_rc_geom g = geom(2048);
	const uint32_t end = TX_BUF_OFF + NTX * 2048;
	struct {
		struct nc_desc d;
		bool ok;
	} cases[] = {
		{ { TX_BUF_OFF, 60, 0, 0 }, true },
		{ { TX_BUF_OFF + 2048, 2048, 0, NC_DESC_F_IP }, true },
		{ { end - 20, 20, 0, 0 }, true },
		{ { TX_BUF_OFF + 100, 60, 0, 0 }, true },          /* inside the area: its bytes */
		{ { TX_BUF_OFF, 19, 0, 0 }, false },               /* no IPv4 header fits */
		{ { TX_BUF_OFF, 2049, 0, 0 }, false },             /* longer than a buffer */
		{ { end - 19, 20, 0, 0 }, false },                 /* past the area's end */
		{ { end, 60, 0, 0 }, false },
		{ { TX_BUF_OFF - 1, 60, 0, 0 }, false },           /* before it */
		{ { BUF_OFF, 60, 0, 0 }, false },                  /* an rx buffer */
		{ { UINT32_MAX - 10, 60, 0, 0 }, false },          /* offset + length wraps */
		{ { TX_BUF_OFF, UINT32_MAX, 0, 0 }, false },
		{ { TX_BUF_OFF, 60, 0, NC_DESC_F_MORE }, false },  /* rx's flag */
		{ { TX_BUF_OFF, 60, 0, 0x80000000u }, false },
	};

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(ncd_rc_tx_desc_ok(&g, &cases[i].d) == cases[i].ok,
			      "case %u: offset %u length %u flags %#x", i, cases[i].d.offset,
			      cases[i].d.length, cases[i].d.flags);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("region_check");
	TCase *tc = tcase_create("rules");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, rx_buffer_offsets);
	tcase_add_test(tc, rx_tail_moves_forward_up_to_the_head);
	tcase_add_test(tc, client_head_at_most_a_ring_ahead);
	tcase_add_test(tc, buffers_go_round_and_bad_returns_change_nothing);
	tcase_add_test(tc, tx_descriptors);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
