/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libnetchannel's insides, shared by its two libraries: libnetchannel (the
 * control protocol and isolated clients, no DPDK) and libnetchannel_zc (the
 * zero-copy model, a DPDK secondary process), which registers its calls
 * with libnetchannel when it is loaded. Not installed.
 */
#ifndef NC_INTERNAL_H
#define NC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nc_proto.h"
#define NC_ALLOW_EXPERIMENTAL     /* the library defines them */
#include "netchannel.h"

#define NC_EXPORT __attribute__((visibility("default")))

/*
 * A call of several symbol versions (libnetchannel.map): impl is exported as
 * name@ver (what binaries linked against that version call), or as
 * name@@ver (the default, what a new link gets). impl is NC_EXPORT; the map's
 * "local: *" hides its own name.
 */
#define NC_SYMVER(impl, name, ver) __asm__(".symver " #impl ", " #name "@" ver)
#define NC_SYMVER_DEFAULT(impl, name, ver) __asm__(".symver " #impl ", " #name "@@" ver)

struct rte_mempool;
struct rte_ring;

/* An isolated client's region, as mapped here, with the geometry the daemon gave, checked. */
struct region {
	uint8_t *base;             /* the daemon's part, read-only: header, rx rings, rx buffers */
	uint64_t size;
	uint8_t *cbase;            /* ours: rx consumer lines, tx and free rings, tx buffers */
	uint64_t csize;            /* 0 in layout 1, whose one part is base's, and writable */
	uint32_t layout;           /* the region's (nc_region_hdr.version): 2, or 1 (one part) */
	struct nc_region_hdr h;    /* a private copy, checked once */
	struct nc_region_ring *tx, *fr;
	uint32_t tx_pending;       /* tx buffers handed out (nc_tx_bufs_get) but not yet sent */
	uint32_t fr_head;          /* our index of the free ring */
	uint32_t tx_head;          /* our index of the tx ring */
	/* NC_CONNECT_ONE_RING: the one rx ring, every channel's. */
	struct nc_region_ring *rx_all;
	struct nc_region_cons *rx_all_cons;  /* its consumer line, ours */
	uint32_t rx_tail;          /* our index of it */
	/* By channel id: the low 16 bits of the generation of our channel with that id, + 1; 0: none. */
	uint32_t *gen;
	uint32_t ngen;
	int efd;                   /* the daemon's eventfd for the ring, or -1 */
};

struct nc_client {
	int fd;
	char path[108];            /* the control socket (sockaddr_un's sun_path) */
	struct nc_channel *channels; /* its handles, what nc_reconnect() makes again */
	uint32_t next_id;
	unsigned int flags;        /* NC_CONNECT_* */
	struct nc_ctl_hello_reply hello;
	struct region rg;          /* isolated: base != NULL */
	struct nc_dir *dir;
	struct nc_client_entry *me;  /* this connection's entry in the client table */
	struct rte_mempool *pool;
	int owner_off;             /* the mbuf owner field */
	int rx_tsc_off;            /* the mbuf rx time field, or -1: the daemon does not stamp */
	uint32_t owner;            /* our mark in it: slot + 1 */
	struct rte_ring *free_ring;/* mbufs given back through the daemon (NC_FREE_RING_FMT), or NULL */
	struct rte_ring *alloc_ring;/* mbufs the daemon allocates for us (NC_ALLOC_RING_FMT) */
	int eal_owned;             /* nc_connect() initialised EAL: nc_disconnect() cleans it up */
	int gone;                  /* 0, or why the daemon has gone: EPIPE or ESHUTDOWN */
	uint64_t next_check;       /* ms (CLOCK_MONOTONIC) of the next look at the socket */
};

struct nc_channel {
	struct nc_client *client;
	struct nc_region_ring *ring; /* isolated: its rx ring in the region */
	struct nc_region_cons *cons; /* isolated: that ring's consumer line, in our part */
	uint32_t rx_tail;          /* isolated: our index of the rx ring (only we write its tail) */
	int can_tx;
	struct rte_ring *rx;
	struct rte_ring *tx;
	struct nc_dir_entry *dir;
	uint32_t id;
	uint64_t generation;       /* the channel's when we got it: another is a new channel */
	uint8_t tx_mac[6];         /* its port's MAC, its frames' source (can_tx) */
	uint16_t tx_mtu;           /* its port's MTU (can_tx; 0: the daemon did not say) */
	int owned;                 /* created by this client: destroy it in the daemon */
	int efd;                   /* the daemon's eventfd for this channel, or -1 */
	int one_ring;              /* delivered on the client's one ring (NC_CONNECT_ONE_RING) */
	/* What nc_reconnect() asks a new daemon for: an owned channel's request, or a name. */
	struct nc_channel *next, *prev;
	char name[NC_NAME_SIZE];
	struct nc_rule rule;
	struct nc_channel_opts opts; /* its nat and meter pointers NULL: has_nat, nat, has_meter, meter */
	struct nc_nat_opts nat;
	struct nc_meter_opts meter;  /* the last meter set (nc_channel_set_meter() too) */
	int has_opts, has_nat, has_meter;
	int lost;                  /* 0, or why nc_reconnect() could not make it again (errno) */
};

/* What libnetchannel asks of libnetchannel_zc for a zero-copy client. */
struct nc_zc_ops {
	/* After HELLO: EAL as the daemon's secondary (unless NC_CONNECT_NO_EAL), then find the
	 * directory, the client table, the pool and the slot's rings. 0 or -errno. */
	int (*attach)(struct nc_client *c);
	/* Before the socket closes: this lcore's mempool cache back into the pool. */
	void (*flush)(struct nc_client *c);
	/* After: EAL cleaned up (c->eal_owned). */
	void (*detach)(struct nc_client *c);
	/* A channel's rings, from the directory entry the reply names. 0, or -1 with errno. */
	int (*open)(struct nc_client *c, struct nc_channel *ch, const struct nc_ctl_channel *info);
	/* One packet copied out (cut to len; its whole length returned), or -EAGAIN. */
	ssize_t (*recv_one)(struct nc_channel *ch, void *buf, size_t len);
	/* One frame copied into an mbuf and sent: len, or -errno (nc_send()'s). */
	ssize_t (*send)(struct nc_channel *ch, const void *buf, size_t len, int ip);
	/* Whether the channel's receive ring is empty. */
	int (*ring_empty)(const struct nc_channel *ch);
	/* Its build (nc_build.h), which a zero-copy HELLO names: the daemon's it must be. */
	void (*build)(char *buf, size_t size);
};

/*
 * Calls shared by the versions of a call (netchannel.c, compat.c), not
 * exported: each takes the library's own structs, whole.
 */
struct nc_channel *nc__channel_create(struct nc_client *c, const char *name,
				      const struct nc_rule *r, const struct nc_channel_opts *opts,
				      const struct nc_nat_opts *nat,
				      const struct nc_meter_opts *meter);
int nc__channel_stats(const struct nc_channel *ch, struct nc_channel_stats *st);
int nc__rule_flow(struct nc_rule *r, const char *proto, const char *dst, long dport);

/* The reason nc_last_reason() gives, printf-style. */
void nc__reason(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A struct a caller passes in that carries its size (netchannel.h, "Structs
 * that grow"): into out, the library's own of known bytes, zeroed where the
 * caller's is shorter. 0, -EINVAL (its size does not hold the size itself)
 * or -EOPNOTSUPP (a byte past what the library knows is set), with a reason.
 */
int nc__sized_in(const void *p, size_t known, void *out, const char *type);

/*
 * A struct the library gives back: the caller's *p gets as much of ours (known
 * bytes) as its size covers, the rest of it zeroed, and its size says how
 * much was filled. 0, or -EINVAL.
 */
int nc__sized_out(void *p, const void *ours, size_t known);

/** libnetchannel_zc, as it loads: its calls. */
void nc__zc_register(const struct nc_zc_ops *ops);

/**
 * Whether the daemon has gone: 0, or the errno calls now fail with (EPIPE:
 * it hung up; ESHUTDOWN: it said it stops). now: look at the socket now, not
 * once per 10 ms.
 */
int nc__daemon_gone(struct nc_client *c, int now);

#endif
