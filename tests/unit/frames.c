/* SPDX-License-Identifier: BSD-3-Clause */
/* The unit tests' frame builder (frames.h). */
#include <string.h>
#include <netinet/in.h>

#include "frames.h"

const uint8_t tf_port_mac[6] = { 0x02, 0x70, 0x63, 0x61, 0x70, 0x00 };
const uint8_t tf_peer_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };

void
tf_put(struct tf_frame *f, const void *p, uint32_t n)
{
	memcpy(f->b + f->len, p, n);
	f->len += n;
}

uint16_t
tf_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

void
tf_wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void
tf_put16(struct tf_frame *f, uint16_t v)
{
	tf_wr16(f->b + f->len, v);
	f->len += 2;
}

uint32_t
tf_sum(const uint8_t *p, uint32_t n)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i + 1 < n; i += 2)
		s += tf_rd16(p + i);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

uint16_t
tf_fold_not(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

void
tf_eth(struct tf_frame *f, const uint8_t dst[6], int tags, uint16_t type)
{
	f->len = 0;
	tf_put(f, dst, 6);
	tf_put(f, tf_peer_mac, 6);
	for (int i = 0; i < tags; i++) {
		tf_put16(f, i == 0 && tags > 1 ? 0x88a8 : 0x8100);
		tf_put16(f, (uint16_t)(10 + i));
	}
	tf_put16(f, type);
}

void
tf_ipv4_csum(struct tf_frame *f, uint32_t off)
{
	tf_wr16(f->b + off + 10, 0);
	tf_wr16(f->b + off + 10, tf_fold_not(tf_sum(f->b + off, (f->b[off] & 0xfu) * 4)));
}

uint32_t
tf_ipv4(struct tf_frame *f, uint8_t proto, uint16_t frag, const uint8_t src[4],
	const uint8_t dst[4], uint16_t l4len, unsigned int optwords)
{
	uint32_t off = f->len, hl = 20 + 4 * optwords;
	uint8_t *h = f->b + off;

	memset(h, 0, hl);
	h[0] = (uint8_t)(0x40 | (hl / 4));
	tf_wr16(h + 2, (uint16_t)(hl + l4len));
	tf_wr16(h + 4, 1);
	tf_wr16(h + 6, frag);
	h[8] = 64;
	h[9] = proto;
	memcpy(h + 12, src, 4);
	memcpy(h + 16, dst, 4);
	memset(h + 20, 1, 4 * optwords);        /* NOP options */
	f->len += hl;
	tf_ipv4_csum(f, off);
	return off;
}

uint32_t
tf_ipv6(struct tf_frame *f, uint8_t nh, uint16_t plen, const uint8_t src[16],
	const uint8_t dst[16])
{
	uint32_t off = f->len;
	uint8_t *h = f->b + off;

	memset(h, 0, 40);
	h[0] = 0x60;
	tf_wr16(h + 4, plen);
	h[6] = nh;
	h[7] = 64;
	memcpy(h + 8, src, 16);
	memcpy(h + 24, dst, 16);
	f->len += 40;
	return off;
}

void
tf_l4(struct tf_frame *f, uint8_t proto, uint16_t sport, uint16_t dport, uint32_t payload)
{
	uint32_t hl = proto == IPPROTO_TCP ? 20 : 8;
	uint8_t *h = f->b + f->len;

	memset(h, 0, hl);
	tf_wr16(h, sport);
	tf_wr16(h + 2, dport);
	if (proto == IPPROTO_UDP)
		tf_wr16(h + 4, (uint16_t)(8 + payload));
	if (proto == IPPROTO_TCP)
		h[12] = 0x50;
	f->len += hl;
	memset(f->b + f->len, 'x', payload);
	f->len += payload;
}
