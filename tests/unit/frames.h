/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The unit tests' frame builder: Ethernet (with tags), IPv4 (with options and a right
 * header checksum), IPv6, transport ports, and the Internet checksum computed the slow,
 * obvious way, independent of the daemon's.
 */
#ifndef NC_TEST_FRAMES_H
#define NC_TEST_FRAMES_H

#include <stdint.h>

/** A frame being built. */
struct tf_frame {
	uint8_t b[2048];
	uint32_t len;
};

/** The port's MAC in the tests (net_pcap's first device), and the peer's. */
extern const uint8_t tf_port_mac[6], tf_peer_mac[6];

/** Append n bytes. */
void tf_put(struct tf_frame *f, const void *p, uint32_t n);

/** Append a 16-bit value in network order. */
void tf_put16(struct tf_frame *f, uint16_t v);

/** Read and write a 16-bit value in network order. */
uint16_t tf_rd16(const uint8_t *p);
void tf_wr16(uint8_t *p, uint16_t v);

/** The RFC 1071 sum of n bytes as big-endian words (an odd last byte padded), unfolded. */
uint32_t tf_sum(const uint8_t *p, uint32_t n);

/** Fold a sum and take its complement: the checksum field's value. */
uint16_t tf_fold_not(uint32_t s);

/**
 * Start a frame: Ethernet to dst from tf_peer_mac, then tags (802.1ad first when there are
 * two or more, 802.1Q after; VLAN ids 10, 11, ...), then the EtherType.
 */
void tf_eth(struct tf_frame *f, const uint8_t dst[6], int tags, uint16_t type);

/**
 * Append an IPv4 header: optwords 32-bit words of NOP options, a total length of the
 * header plus l4len, the fragment field frag, TTL 64, and a right checksum.
 * @return its offset in the frame
 */
uint32_t tf_ipv4(struct tf_frame *f, uint8_t proto, uint16_t frag, const uint8_t src[4],
		 const uint8_t dst[4], uint16_t l4len, unsigned int optwords);

/** Recompute the checksum of the IPv4 header at off (after a test changed it). */
void tf_ipv4_csum(struct tf_frame *f, uint32_t off);

/** Append an IPv6 header: next header nh, payload length plen, hop limit 64. @return its offset */
uint32_t tf_ipv6(struct tf_frame *f, uint8_t nh, uint16_t plen, const uint8_t src[16],
		 const uint8_t dst[16]);

/**
 * Append a transport header with these ports (8 bytes; 20 for TCP, with its data offset;
 * UDP's length is 8 + payload), then payload bytes of 'x'. Checksums are left 0.
 */
void tf_l4(struct tf_frame *f, uint8_t proto, uint16_t sport, uint16_t dport, uint32_t payload);

#endif
