/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IP reassembly and fragmentation for the workers (see frag.h).
 *
 * rte_ip_frag does the reassembly and reports only "not yet" or "given up"
 * (the fragments go to the death row). The reasons are told apart around
 * it: what it would refuse alone is checked before (too big, no payload,
 * headers it cannot take), old datagrams are expired before each fragment
 * so that none is given up inside the call for its age, and then a call
 * that puts only the new fragment on the death row found no room in the
 * table, while one that puts more gave up a datagram whose fragments
 * overlap, repeat, or are more than it can hold.
 */
/* rte_ip_frag_table_del_expired_entries() is experimental in 22.11. */
#define ALLOW_EXPERIMENTAL_API

#include <errno.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_ip_frag.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>

#define NCD_LOGTYPE ncd_logtype_worker
#include "datapath/datapath.h"
#include "datapath/dp.h"
#include "datapath/frag.h"
#include "ncd.h"
#include "packet/parse.h"
#include "port/port.h"

_Static_assert(NCD_FRAG_MAX_PIECES == RTE_LIBRTE_IP_FRAG_MAX_FRAG,
	       "config.c bounds the pool's share by rte_ip_frag's fragments per datagram");

#define ETH_HLEN 14
#define IPV6_HLEN 40
#define FRAG_HLEN 8
#define IP_MAX 65535u
/* Free the death row before a call could overflow it: a call adds at most a datagram and one. */
#define DR_ROOM (2 * (RTE_LIBRTE_IP_FRAG_MAX_FRAG + 1))

int
ncd_frag_init(struct ncd *d)
{
	uint64_t cycles = rte_get_tsc_hz() / 1000 * d->cfg.frag_timeout_ms;

	for (unsigned int i = 0; i < d->cfg.nworkers; i++) {
		struct ncd_worker *w = &d->workers[i];

		/* Four ways per bucket, a bucket per datagram: room to spare before a bucket fills. */
		w->frag_tbl = rte_ip_frag_table_create(d->cfg.frag_datagrams, 4, d->cfg.frag_datagrams,
						       cycles, (int)rte_lcore_to_socket_id(w->lcore));
		w->frag_dr = rte_zmalloc("ncd_frag_dr", sizeof(*w->frag_dr), RTE_CACHE_LINE_SIZE);
		if (w->frag_tbl == NULL || w->frag_dr == NULL) {
			NCD_LOG(ERR, "worker %u: reassembly table of %u datagrams: out of memory", i,
				d->cfg.frag_datagrams);
			return -1;
		}
	}
	return 0;
}

void
ncd_frag_free(struct ncd *d)
{
	ncd_frag_drain(d);
	for (unsigned int i = 0; d->workers != NULL && i < d->cfg.nworkers; i++) {
		struct ncd_worker *w = &d->workers[i];

		rte_ip_frag_table_destroy(w->frag_tbl);
		rte_free(w->frag_dr);
		w->frag_tbl = NULL;
		w->frag_dr = NULL;
	}
}

/* The port whose counters a given-up fragment goes to: the one it came in on. */
static struct ncd_port_stats *
stats_of(const struct ncd *d, struct ncd_worker *w, const struct rte_mbuf *m)
{
	for (unsigned int pi = 0; pi < d->cfg.nports; pi++)
		if (d->ports[pi].port_id == m->port)
			return &w->pstats[pi];
	return &w->pstats[0];
}

uint32_t
ncd_frag_expire(const struct ncd *d, struct ncd_worker *w, uint64_t now)
{
	struct rte_ip_frag_death_row *dr = w->frag_dr;
	uint32_t before = dr->cnt, n;

	rte_ip_frag_table_del_expired_entries(w->frag_tbl, dr, now);
	n = dr->cnt - before;
	for (uint32_t i = before; i < dr->cnt; i++)
		stats_of(d, w, dr->row[i])->frag_drop_timeout++;
	if (dr->cnt > 0)
		rte_ip_frag_free_death_row(dr, 0);
	return n;
}

void
ncd_frag_drain(struct ncd *d)
{
	for (unsigned int i = 0; d->workers != NULL && i < d->cfg.nworkers; i++) {
		struct ncd_worker *w = &d->workers[i];

		/* The death row takes a few datagrams at a time: until the table is empty. */
		while (w->frag_tbl != NULL && w->frag_dr != NULL &&
		       ncd_frag_expire(d, w, UINT64_MAX) > 0)
			;
	}
}

/*
 * The kernel must get a datagram no channel claims as the fragments it came
 * in, byte for byte. Reassembly keeps each fragment's payload (the chain it
 * makes) but rewrites or strips its headers, and the trailer (Ethernet
 * padding) is trimmed before it; so each fragment's headers and trailer are
 * kept first at the start of its own mbuf's buffer, in the headroom that
 * rte_ip_frag never touches: a few dozen bytes copied a fragment, no mbuf
 * more. ncd_frag_to_kernel() finds them again along the chain.
 */
#define STASH_MAGIC 0x4e434653u         /* "NCFS" */

struct stash {
	uint32_t magic;
	uint32_t seq;           /* the worker's count of fragments: their order of arrival */
	uint32_t tag;           /* the datagram's id (and its family) */
	uint16_t ofs, len;      /* its payload's place in the datagram */
	uint8_t l2, hlen;       /* the bytes before its payload (Ethernet's l2 of them) */
	uint8_t tlen;           /* the bytes after it */
	uint8_t trailer_lost;   /* longer than the headroom takes: not kept */
	uint8_t bytes[];        /* hlen, then tlen */
};

/* The bytes of the longest headers kept: two tags, then IPv4 with options (IPv6 and its fragment header are less). */
#define STASH_MAX (sizeof(struct stash) + ETH_HLEN + 8 + 60)

static inline struct stash *
stash_of(const struct rte_mbuf *m)
{
	return (struct stash *)m->buf_addr;
}

/* Keep a fragment's headers and trailer (see above); a fragment whose headers do not fit keeps nothing. */
static void
stash_keep(struct ncd_worker *w, struct rte_mbuf *m, uint32_t hlen, uint32_t trailer,
	   uint32_t ofs, uint32_t len, uint32_t tag)
{
	struct stash *st = stash_of(m);

	/* Its other segments' headrooms could hold an older fragment's stash: none is taken for this one's. */
	for (struct rte_mbuf *s = m->next; s != NULL; s = s->next)
		if (s->data_off >= sizeof(struct stash))
			stash_of(s)->magic = 0;
	if (m->data_off < sizeof(*st) + hlen) {
		if (m->data_off >= sizeof(st->magic))
			st->magic = 0;
		return;
	}
	st->magic = STASH_MAGIC;
	st->seq = w->frag_seq++;
	st->tag = tag;
	st->ofs = (uint16_t)ofs;
	st->len = (uint16_t)len;
	st->l2 = (uint8_t)m->l2_len;
	st->hlen = (uint8_t)hlen;
	memcpy(st->bytes, rte_pktmbuf_mtod(m, const void *), hlen);
	st->trailer_lost = trailer > UINT8_MAX || m->data_off < sizeof(*st) + hlen + trailer;
	st->tlen = st->trailer_lost ? 0 : (uint8_t)trailer;
	if (st->tlen > 0) {
		const void *t = rte_pktmbuf_read(m, m->pkt_len - trailer, trailer, st->bytes + hlen);

		if (t != st->bytes + hlen)
			memcpy(st->bytes + hlen, t, trailer);
	}
}

/* Drop a fragment before the table sees it. */
static struct rte_mbuf *
refuse(struct rte_mbuf *m, uint64_t *counter)
{
	(*counter)++;
	rte_pktmbuf_free(m);
	return NULL;
}

struct rte_mbuf *
ncd_frag_gather(const struct ncd *d, struct ncd_worker *w, struct ncd_port_stats *ps,
		struct rte_mbuf *m, const struct ncd_parsed *pp, uint64_t now)
{
	struct rte_ip_frag_death_row *dr = w->frag_dr;
	uint32_t l3 = pp->l2_len, before, ofs, len, trailer;
	struct rte_mbuf *r;
	uint8_t *ip;
	uint32_t id = 0;

	ps->frag_in++;
	/* rte_ip_frag reads and rewrites the headers in place: they must be in the first segment. */
	if ((pp->key.family == NC_TRIE_AF_INET ? pp->l4_off : pp->frag_hdr + FRAG_HLEN) >
	    m->data_len)
		return refuse(m, &ps->frag_drop_unsupported);
	ip = rte_pktmbuf_mtod_offset(m, uint8_t *, l3);
	trailer = m->pkt_len > l3 + pp->l3_len ? m->pkt_len - l3 - pp->l3_len : 0;
	m->l2_len = l3;
	if (pp->key.family == NC_TRIE_AF_INET) {
		m->l3_len = (ip[0] & 0xf) * 4u;
		ofs = (ncd_rd16(ip + 6) & 0x1fffu) * 8;
		len = pp->l3_len - m->l3_len;
		if (len == 0)
			return refuse(m, &ps->frag_drop_overlap);
		if (ofs + len > IP_MAX - m->l3_len)
			return refuse(m, &ps->frag_drop_too_big);
	} else {
		/* rte_ip_frag takes only a fragment header right after the IPv6 header. */
		if (pp->frag_hdr != l3 + IPV6_HLEN)
			return refuse(m, &ps->frag_drop_unsupported);
		m->l3_len = IPV6_HLEN + FRAG_HLEN;
		ofs = ncd_rd16(ip + IPV6_HLEN + 2) & 0xfff8u;
		len = pp->l3_len - m->l3_len;
		if (len == 0)
			return refuse(m, &ps->frag_drop_overlap);
		if (ofs + len > IP_MAX)
			return refuse(m, &ps->frag_drop_too_big);
		memcpy(&id, ip + IPV6_HLEN + 4, 4);
	}
	stash_keep(w, m, l3 + m->l3_len, trailer, ofs, len,
		   pp->key.family == NC_TRIE_AF_INET ? 1u << 31 | ncd_rd16(ip + 4) : id);
	/* Ethernet padding past the datagram would be taken for payload. */
	if (trailer > 0)
		rte_pktmbuf_trim(m, (uint16_t)trailer);
	ncd_frag_expire(d, w, now);
	if (dr->cnt + DR_ROOM > RTE_DIM(dr->row))
		rte_ip_frag_free_death_row(dr, 0);
	before = dr->cnt;
	if (pp->key.family == NC_TRIE_AF_INET)
		r = rte_ipv4_frag_reassemble_packet(w->frag_tbl, dr, m, now,
						    (struct rte_ipv4_hdr *)ip);
	else
		r = rte_ipv6_frag_reassemble_packet(w->frag_tbl, dr, m, now,
						    (struct rte_ipv6_hdr *)ip,
						    (struct rte_ipv6_fragment_ext *)(ip + IPV6_HLEN));
	w->frag_used = true;
	if (r == NULL) {
		if (dr->cnt == before + 1 && dr->row[before] == m)
			ps->frag_drop_table_full++;
		else
			ps->frag_drop_overlap += dr->cnt - before;
		return NULL;
	}
	ps->frag_datagrams++;
	/* The whole datagram's checksums are not the NIC's verdict on one fragment. */
	r->ol_flags &= ~(RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK |
			 RTE_MBUF_F_RX_FDIR | RTE_MBUF_F_RX_FDIR_ID);
	ip = rte_pktmbuf_mtod_offset(r, uint8_t *, l3);
	if (pp->key.family == NC_TRIE_AF_INET) {
		struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)ip;

		/* Fragmented once, it may be again: DF no longer holds. */
		h->fragment_offset = 0;
		h->hdr_checksum = 0;
		h->hdr_checksum = rte_ipv4_cksum(h);
	} else {
		r->hash.usr = id;
	}
	return r;
}

/* Where the IP header starts: after the Ethernet header and up to two tags. */
static int
l2_length(const uint8_t *f, uint32_t avail, uint16_t *type)
{
	uint32_t l2 = ETH_HLEN;

	if (avail < ETH_HLEN)
		return -EINVAL;
	*type = ncd_rd16(f + 12);
	for (int tags = 0; *type == 0x8100 || *type == 0x88a8; tags++) {
		if (tags == 2 || l2 + 4 > avail)
			return -EINVAL;
		*type = ncd_rd16(f + l2 + 2);
		l2 += 4;
	}
	return (int)l2;
}

/* A new single-segment frame of len bytes, its first hlen copied from hdr. */
static uint8_t *
piece(struct rte_mempool *mp, struct rte_mbuf **out, const uint8_t *hdr, uint32_t hlen,
      uint32_t len)
{
	struct rte_mbuf *o = rte_pktmbuf_alloc(mp);
	uint8_t *p;

	if (o == NULL)
		return NULL;
	p = (uint8_t *)rte_pktmbuf_append(o, (uint16_t)len);
	if (p == NULL) {
		rte_pktmbuf_free(o);
		return NULL;
	}
	memcpy(p, hdr, hlen);
	*out = o;
	return p;
}

/*
 * IPv4 options in a fragment past the datagram's first: those without the
 * copy flag become no-ops, as the kernel's ip_options_fragment() does.
 */
static void
options_fragment(uint8_t *o, uint32_t len)
{
	for (uint32_t i = 0; i < len;) {
		if (o[i] == 0)
			break;
		if (o[i] == 1 || i + 1 >= len) {
			i++;
			continue;
		}
		uint32_t ol = o[i + 1];

		if (ol < 2 || i + ol > len)
			break;
		if (!(o[i] & 0x80))
			memset(o + i, 1, ol);
		i += ol;
	}
}

/* What a datagram's pieces are cut from. */
struct cut {
	const uint8_t *hdr;     /* the headers each piece starts with: Ethernet, then IP */
	uint32_t l2, hl;        /* their lengths: Ethernet's, and IPv4's (options too) or IPv6's (40) */
	bool v4;
	bool df;                /* IPv4: DF on every piece */
	bool more;              /* more of the datagram follows: MF on the last piece too */
	uint32_t ofs;           /* where the payload is in the datagram */
	uint32_t id;            /* IPv6: the fragment header's id... */
	uint8_t nh;             /* ...and next header */
	const struct rte_mbuf *m;
	uint32_t at, len;       /* the payload: len bytes of m from at */
};

/*
 * A payload in single-segment pieces of at most mtu bytes of IP, each with
 * the headers, its own offset and MF; IPv4 options without the copy flag
 * become no-ops past the datagram's first bytes, as the kernel's
 * ip_options_fragment() makes them. @return how many in out, or -ENOBUFS,
 * -E2BIG (more than max), -EMSGSIZE (mtu below the headers and 8 bytes).
 */
static int
cut(const struct cut *c, uint32_t mtu, struct rte_mempool *mp, struct rte_mbuf **out,
    unsigned int max)
{
	uint32_t fhl = c->v4 ? 0 : FRAG_HLEN, chunk, n;

	if (mtu < c->hl + fhl + 8)
		return -EMSGSIZE;
	chunk = (mtu - c->hl - fhl) & ~7u;
	n = (c->len + chunk - 1) / chunk;
	if (n > max)
		return -E2BIG;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t at = k * chunk, len = RTE_MIN(chunk, c->len - at), ofs = c->ofs + at;
		uint8_t *p = piece(mp, &out[k], c->hdr, c->l2 + c->hl, c->l2 + c->hl + fhl + len);
		uint8_t *ip = p + c->l2;
		bool mf = k + 1 < n || c->more;
		const void *s;

		if (p == NULL) {
			rte_pktmbuf_free_bulk(out, k);
			return -ENOBUFS;
		}
		if (c->v4) {
			struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)ip;

			if (ofs > 0)
				options_fragment(ip + 20, c->hl - 20);
			h->total_length = rte_cpu_to_be_16((uint16_t)(c->hl + len));
			h->fragment_offset = rte_cpu_to_be_16((uint16_t)(ofs / 8) |
							      (c->df ? 0x4000 : 0) | (mf ? 0x2000 : 0));
			h->hdr_checksum = 0;
			h->hdr_checksum = rte_ipv4_cksum(h);
		} else {
			uint8_t *fh = ip + IPV6_HLEN;
			uint16_t fo = (uint16_t)(ofs & 0xfff8u) | (mf ? 1 : 0);

			fh[0] = c->nh;
			fh[1] = 0;
			fh[2] = (uint8_t)(fo >> 8);
			fh[3] = (uint8_t)fo;
			memcpy(fh + 4, &c->id, 4);
			ip[6] = 44;    /* IPPROTO_FRAGMENT */
			ip[4] = (uint8_t)((fhl + len) >> 8);
			ip[5] = (uint8_t)(fhl + len);
		}
		s = rte_pktmbuf_read(c->m, c->at + at, len, ip + c->hl + fhl);
		if (s != ip + c->hl + fhl)
			memcpy(ip + c->hl + fhl, s, len);
	}
	return (int)n;
}

int
ncd_frag_split(const struct rte_mbuf *m, uint32_t mtu, struct rte_mempool *mp,
	       struct rte_mbuf **out, unsigned int max)
{
	uint8_t buf[NCD_PARSE_BYTES];
	uint32_t want = RTE_MIN(m->pkt_len, (uint32_t)NCD_PARSE_BYTES);
	const uint8_t *f = rte_pktmbuf_read(m, 0, want, buf);
	uint32_t l2, hl, total;
	uint16_t type;
	bool v4;
	int ret;

	if (f == NULL || (ret = l2_length(f, want, &type)) < 0)
		return -EINVAL;
	l2 = (uint32_t)ret;
	v4 = type == 0x0800;
	if (!v4 && type != 0x86dd)
		return -EINVAL;
	if (l2 + (v4 ? 20 : IPV6_HLEN) > want)
		return -E2BIG;
	hl = v4 ? (f[l2] & 0xfu) * 4 : IPV6_HLEN;
	total = v4 ? ncd_rd16(f + l2 + 2) : IPV6_HLEN + ncd_rd16(f + l2 + 4);
	if (l2 + hl > want || total < hl || l2 + total > m->pkt_len)
		return -EINVAL;
	if (total <= mtu) {
		uint8_t *p;

		if (max < 1)
			return -E2BIG;
		p = piece(mp, &out[0], f, 0, l2 + total);
		if (p == NULL)
			return -ENOBUFS;
		const void *s = rte_pktmbuf_read(m, 0, l2 + total, p);

		if (s != p)
			memcpy(p, s, l2 + total);
		return 1;
	}
	if (v4 && (ncd_rd16(f + l2 + 6) & 0x4000))
		return -EMSGSIZE;
	/* Its own offset and MF, within the datagram's (which may be a fragment). */
	return cut(&(struct cut){ .hdr = f, .l2 = l2, .hl = hl, .v4 = v4,
				  .ofs = v4 ? (ncd_rd16(f + l2 + 6) & 0x1fffu) * 8 : 0,
				  .more = v4 && (ncd_rd16(f + l2 + 6) & 0x2000),
				  .id = m->hash.usr, .nh = v4 ? 0 : f[l2 + 6],
				  .m = m, .at = l2 + hl, .len = total - hl },
		   mtu, mp, out, max);
}

int
ncd_frag_send(const struct ncd *d, uint16_t port_id, uint16_t txq, uint32_t mtu,
	      struct ncd_port_stats *ps, struct rte_mbuf *m)
{
	struct rte_mbuf *out[NCD_FRAG_SPLIT_MAX];
	int n = ncd_frag_split(m, mtu, d->pool, out, RTE_DIM(out));
	uint16_t sent;

	rte_pktmbuf_free(m);
	if (n < 0)
		return n;
	ps->frag_out += (uint64_t)n;
	sent = rte_eth_tx_burst(port_id, txq, out, (uint16_t)n);
	if (sent == n)
		return 0;
	rte_pktmbuf_free_bulk(&out[sent], (unsigned int)(n - sent));
	return -EAGAIN;
}

/*
 * The stashes of a reassembled datagram's fragments, in their order of
 * arrival, each checked against the chain: its payload is the next one in
 * the datagram and ends where a segment does. @return how many, or 0 (a
 * fragment's headers were not kept: re-cut the datagram whole).
 */
static unsigned int
stashes(const struct rte_mbuf *r, uint32_t hl0, const struct stash **st)
{
	const struct rte_mbuf *seg = r;
	uint32_t pos = 0, skip = hl0;
	unsigned int n = 0;

	while (seg != NULL) {
		const struct stash *s = stash_of(seg);
		uint32_t left;

		if (n == NCD_FRAG_MAX_PIECES || seg->data_off < sizeof(*s) ||
		    s->magic != STASH_MAGIC || (n > 0 && s->tag != st[0]->tag) || s->ofs != pos ||
		    seg->data_off < sizeof(*s) + s->hlen + s->tlen)
			return 0;
		left = s->len;
		while (seg != NULL && left > seg->data_len - skip) {
			left -= seg->data_len - skip;
			skip = 0;
			seg = seg->next;
		}
		if (seg == NULL || left != seg->data_len - skip)
			return 0;
		/* Insertion by arrival: at most eight. */
		unsigned int i = n++;

		for (; i > 0 && (int32_t)(st[i - 1]->seq - s->seq) > 0; i--)
			st[i] = st[i - 1];
		st[i] = s;
		pos += s->len;
		skip = 0;
		seg = seg->next;
	}
	return pos == r->pkt_len - hl0 ? n : 0;
}

/*
 * An original fragment too long for the exception device's MTU, cut again
 * with its own headers: its TOS, TTL, DF and options, its id, MF on every
 * piece but its last unless it had MF. @return as cut()
 */
static int
recut_one(const struct rte_mbuf *r, uint32_t hl0, const struct stash *s, uint32_t mtu,
	  struct rte_mempool *mp, struct rte_mbuf **out, unsigned int max)
{
	const uint8_t *ip = s->bytes + s->l2;
	bool v4 = (ip[0] >> 4) == 4;
	uint32_t id = 0;

	if (!v4)
		memcpy(&id, ip + IPV6_HLEN + 4, 4);
	return cut(&(struct cut){ .hdr = s->bytes, .l2 = s->l2, .v4 = v4,
				  .hl = v4 ? (uint32_t)(s->hlen - s->l2) : IPV6_HLEN,
				  .df = v4 && (ncd_rd16(ip + 6) & 0x4000),
				  .more = v4 ? (ncd_rd16(ip + 6) & 0x2000) != 0 : (ip[IPV6_HLEN + 3] & 1),
				  .ofs = s->ofs, .id = id, .nh = v4 ? 0 : ip[IPV6_HLEN],
				  .m = r, .at = hl0 + s->ofs, .len = s->len },
		   mtu, mp, out, max);
}

/*
 * The original fragments of a reassembled datagram (see ncd_frag_to_kernel()),
 * those too long for mtu cut again. @return the frames in out, with *kept of
 * them originals, or -ENOENT (not every fragment's headers were kept), or
 * -ENOBUFS, -E2BIG, -EMSGSIZE.
 */
static int
originals(const struct rte_mbuf *r, uint32_t mtu, struct rte_mempool *mp, struct rte_mbuf **out,
	  unsigned int max, unsigned int *kept)
{
	const struct stash *st[NCD_FRAG_MAX_PIECES];
	const uint8_t *ip = rte_pktmbuf_mtod_offset(r, const uint8_t *, r->l2_len);
	uint32_t hl0 = r->l2_len + ((ip[0] >> 4) == 4 ? (ip[0] & 0xfu) * 4 : IPV6_HLEN);
	unsigned int nst = stashes(r, hl0, st), n = 0;
	int ret;

	*kept = 0;
	if (nst == 0)
		return -ENOENT;
	for (unsigned int i = 0; i < nst; i++) {
		const struct stash *s = st[i];
		uint32_t flen = s->hlen + s->len + s->tlen;
		uint8_t *p;
		const void *src;

		if ((uint32_t)(s->hlen - s->l2) + s->len > mtu) {
			ret = recut_one(r, hl0, s, mtu, mp, out + n, max - n);
			if (ret < 0)
				goto fail;
			n += (unsigned int)ret;
			continue;
		}
		ret = -E2BIG;
		if (n == max)
			goto fail;
		ret = -ENOBUFS;
		p = piece(mp, &out[n], s->bytes, s->hlen, flen);
		if (p == NULL)
			goto fail;
		n++;
		src = rte_pktmbuf_read(r, hl0 + s->ofs, s->len, p + s->hlen);
		if (src != p + s->hlen)
			memcpy(p + s->hlen, src, s->len);
		memcpy(p + s->hlen + s->len, s->bytes + s->hlen, s->tlen);
		*kept += !s->trailer_lost;
	}
	return (int)n;
fail:
	rte_pktmbuf_free_bulk(out, n);
	return ret;
}

int
ncd_frag_to_kernel(const struct ncd *d, uint16_t port_id, uint16_t txq, uint32_t mtu,
		   struct ncd_port_stats *ps, struct rte_mbuf *m)
{
	struct rte_mbuf *out[NCD_FRAG_SPLIT_MAX];
	unsigned int kept;
	int n = m->nb_segs > 1 ? originals(m, mtu, d->pool, out, RTE_DIM(out), &kept) : -ENOENT;
	uint16_t sent;

	if (n == -ENOENT) {
		ps->frag_recut++;
		return ncd_frag_send(d, port_id, txq, mtu, ps, m);
	}
	rte_pktmbuf_free(m);
	if (n < 0)
		return n;
	ps->frag_out += (uint64_t)n;
	ps->frag_kept += kept;
	if (kept < (unsigned int)n)
		ps->frag_recut++;
	sent = rte_eth_tx_burst(port_id, txq, out, (uint16_t)n);
	if (sent == n)
		return 0;
	rte_pktmbuf_free_bulk(&out[sent], (unsigned int)(n - sent));
	return -EAGAIN;
}
