/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A test consumer: a DPDK secondary process that finds a static channel in
 * netchanneld's directory, dequeues its packets, writes them to a pcap file
 * and returns them to the pool.
 *
 *   nc_consumer --prefix P --channel NAME --out FILE [--count N] [--timeout-ms T]
 *               [--lcore-id ID]
 *   nc_consumer --prefix P --hold-memory-lock [--lcore-id ID]
 *
 * --hold-memory-lock: a client that holds DPDK's memory hotplug lock (read)
 * until its stdin closes, as one stopped or killed inside rte_eal_init()
 * does: the daemon's teardown cannot finish meanwhile. Prints "held".
 *
 * Exits 0 once it has N packets (or, without --count, when T passes), 1 on
 * timeout short of N, 2 on bad usage or when the channel is not found.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>
#include <rte_eal.h>
#include <rte_eal_memconfig.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_memzone.h>
#include <rte_memory.h>
#include <rte_ring.h>

#include "nc_proto.h"

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "prefix", required_argument, NULL, 'p' },
		{ "channel", required_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' },
		{ "count", required_argument, NULL, 'n' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "lcore-id", required_argument, NULL, 'l' },
		{ "hold-memory-lock", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	const char *prefix = NULL, *channel = NULL, *out = NULL;
	unsigned long count = 0, timeout = 5000, lcore = 7;
	char lcores[32], *eal[16];
	const struct rte_memzone *mz;
	const struct nc_dir *dir;
	struct nc_dir_entry *e = NULL;
	struct rte_ring *ring;
	pcap_dumper_t *dump;
	pcap_t *pc;
	unsigned long got = 0;
	uint64_t deadline;
	int c, n = 0, hold = 0;

	while ((c = getopt_long(argc, argv, "p:c:o:n:t:l:", opts, NULL)) != -1) {
		switch (c) {
		case 'p': prefix = optarg; break;
		case 'c': channel = optarg; break;
		case 'o': out = optarg; break;
		case 'n': count = strtoul(optarg, NULL, 0); break;
		case 't': timeout = strtoul(optarg, NULL, 0); break;
		case 'l': lcore = strtoul(optarg, NULL, 0); break;
		case 'H': hold = 1; break;
		default: return 2;
		}
	}
	if (prefix == NULL || (!hold && (channel == NULL || out == NULL))) {
		fprintf(stderr, "usage: nc_consumer --prefix P --channel NAME --out FILE "
				"[--count N] [--timeout-ms T] [--lcore-id ID]\n");
		return 2;
	}
	/* An lcore id of its own, mapped to CPU 0, so mempool caches never collide. */
	snprintf(lcores, sizeof(lcores), "%lu@0", lcore);
	eal[n++] = argv[0];
	eal[n++] = "--proc-type=secondary";
	eal[n++] = "--file-prefix";
	eal[n++] = (char *)prefix;
	eal[n++] = "--no-pci";
	eal[n++] = "--lcores";
	eal[n++] = lcores;
	eal[n++] = "--log-level=lib.eal:error";
	eal[n] = NULL;
	if (rte_eal_init(n, eal) < 0) {
		fprintf(stderr, "nc_consumer: rte_eal_init: %s\n", rte_strerror(rte_errno));
		return 2;
	}
	if (hold) {
		char line[16];

		rte_mcfg_mem_read_lock();
		printf("held\n");
		fflush(stdout);
		while (fgets(line, sizeof(line), stdin) != NULL)
			;
		rte_mcfg_mem_read_unlock();
		return 0;
	}
	mz = rte_memzone_lookup(NC_DIR_MZ);
	if (mz == NULL) {
		fprintf(stderr, "nc_consumer: no channel directory (%s)\n", NC_DIR_MZ);
		return 2;
	}
	dir = mz->addr;
	if (dir->magic != NC_DIR_MAGIC || dir->version != NC_SHM_LAYOUT_VERSION) {
		fprintf(stderr, "nc_consumer: directory magic/version %#x/%u, want %#x/%u\n",
			dir->magic, dir->version, NC_DIR_MAGIC, NC_SHM_LAYOUT_VERSION);
		return 2;
	}
	for (uint32_t i = 0; i < dir->max_channels; i++) {
		struct nc_dir_entry *x = (struct nc_dir_entry *)&dir->e[i];

		/* Acquire: pairs with the daemon's release when it made the entry live. */
		if (__atomic_load_n(&x->state, __ATOMIC_ACQUIRE) == NC_DIR_LIVE &&
		    strcmp(x->name, channel) == 0) {
			e = x;
			break;
		}
	}
	if (e == NULL || e->action != NC_ACTION_DELIVER) {
		fprintf(stderr, "nc_consumer: no deliver channel named '%s'\n", channel);
		return 2;
	}
	/* The ring's address, as nc_proto.h says: checked to be DPDK memory and that ring. */
	ring = (struct rte_ring *)(uintptr_t)e->rx_ring_addr;
	if (ring == NULL || rte_mem_virt2memseg(ring, NULL) == NULL ||
	    strncmp(ring->name, e->rx_ring, sizeof(ring->name)) != 0) {
		fprintf(stderr, "nc_consumer: channel '%s': no ring %s at %#" PRIx64 "\n", channel,
			e->rx_ring, e->rx_ring_addr);
		return 2;
	}
	pc = pcap_open_dead(DLT_EN10MB, 65535);
	dump = pcap_dump_open(pc, out);
	if (dump == NULL) {
		fprintf(stderr, "nc_consumer: pcap_dump_open(%s): %s\n", out, pcap_geterr(pc));
		return 2;
	}
	deadline = now_ms() + timeout;
	while ((count == 0 || got < count) && now_ms() < deadline) {
		struct rte_mbuf *m[32];
		unsigned int k = rte_ring_dequeue_burst(ring, (void **)m, 32, NULL);
		uint64_t bytes = 0;

		if (k == 0) {
			usleep(1000);
			continue;
		}
		for (unsigned int i = 0; i < k; i++) {
			static uint8_t buf[65536];
			struct pcap_pkthdr h = { .caplen = m[i]->pkt_len, .len = m[i]->pkt_len };
			const void *data = rte_pktmbuf_read(m[i], 0, m[i]->pkt_len, buf);

			gettimeofday(&h.ts, NULL);
			pcap_dump((u_char *)dump, &h, data);
			bytes += m[i]->pkt_len;
		}
		__atomic_store_n(&e->bytes_out, e->bytes_out + bytes, __ATOMIC_RELEASE);
		rte_pktmbuf_free_bulk(m, k);
		got += k;
	}
	pcap_dump_close(dump);
	pcap_close(pc);
	printf("nc_consumer: %s: %lu packets\n", channel, got);
	rte_eal_cleanup();
	return count != 0 && got < count ? 1 : 0;
}
