/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Packet capture by the daemon itself ("capture port|channel ..." on the
 * control socket; ncctl capture): workers copy what a capture wants with
 * librte_pcapng into a pool and ring of the capture's own; a thread of the
 * capture writes them as pcapng into a pipe whose other end the caller got
 * with the reply. No secondary process, so it works with every PMD.
 *
 * A port capture sees what the NIC port receives and what is sent out of
 * it (ethdev rx and tx callbacks, as pdump's); a channel capture sees what
 * the classifier gave the channel (delivered, dropped by its rule, or
 * translated by NAT) and what its clients send. Each is bounded by a count,
 * and ends early when the reader closes the pipe; copies that find the
 * capture's pool or ring full are counted, never waited for.
 */
#ifndef NCD_DATAPATH_CAPTURE_H
#define NCD_DATAPATH_CAPTURE_H

#include <stdint.h>

#include <jansson.h>

struct ncd;
struct ncd_capture;
struct rte_mbuf;

#define NCD_CAPTURE_MAX 4              /* captures at once */
#define NCD_CAPTURE_COUNT_MAX 1000000  /* packets one capture may take */
#define NCD_CAPTURE_DEFAULT_COUNT 1000

/** What a capture takes, as the CLI gives it. */
struct ncd_capture_req {
	int port;                      /**< a port index, or -1 */
	int32_t channel;               /**< a channel id, or -1 */
	uint64_t count;                /**< packets, 1..NCD_CAPTURE_COUNT_MAX */
	uint32_t snaplen;              /**< bytes of each packet kept, 64..65535 */
	const char *filter;            /**< a pcap filter expression, or NULL */
};

/**
 * Start a capture (control thread, under d->lock).
 *
 * @param err
 *   On failure, what was wrong, for the caller.
 * @param fd
 *   On success, the read end of the capture's pipe, for the caller: the
 *   pcapng stream, until EOF.
 * @param res
 *   On success, the capture's description (JSON).
 * @return
 *   0, or a negative errno: -EBUSY (NCD_CAPTURE_MAX running, or the channel
 *   has one), -EINVAL (the filter), -ENOMEM.
 */
int ncd_capture_start(struct ncd *d, const struct ncd_capture_req *req, char *err,
		      size_t errlen, int *fd, json_t **res);

/**
 * End the captures that are done (count reached, reader gone, channel
 * destroyed) and free what they held; control thread, every poll.
 */
void ncd_capture_reap(struct ncd *d);

/** End every capture (at exit, workers stopped). */
void ncd_capture_close_all(struct ncd *d);

/** The captures running, for "show capture" (JSON array). */
json_t *ncd_capture_view(void);

/**
 * A worker's copies of n packets that a channel capture wants (the
 * channel's packets in, or its clients' out): filtered, counted, bounded.
 *
 * @param c
 *   The channel's capture.
 * @param port_id
 *   The ethdev port they came in on or go out of.
 * @param out
 *   Non-zero: they go out.
 */
void ncd_capture_take(struct ncd_capture *c, uint16_t port_id, uint16_t queue,
		      struct rte_mbuf **m, uint16_t n, int out);

#endif
