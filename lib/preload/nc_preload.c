/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libnetchannel_preload: an unmodified program's UDP sockets on netchanneld's
 * channels (LD_PRELOAD, or netchannel-run). docs/preload.md says what it does
 * and what it does not; this file says how.
 *
 * A UDP socket (IPv4 or IPv6) stays a kernel socket until it is bound,
 * connected, or sends. Then it is bound in the kernel as the application
 * asked (so the port is held, and getsockname() and friends answer as ever),
 * and gets a connection of its own to the daemon (NC_CONNECT_ONE_RING) with a
 * channel for each local address it covers: its bound address, or, for a
 * wildcard bind, each address of the host's. The kernel socket moves to a
 * descriptor the application does not know of, and the application's
 * descriptor becomes the connection's eventfd, which poll(), select() and
 * epoll see without any help: readable while datagrams wait (the library
 * keeps it so, below), always writable. The kernel socket is polled beside
 * it (poll(), select() and epoll_ctl() here add it), so whatever still
 * reaches the kernel's socket (datagrams from the host itself) is received
 * too, and the socket carries on on the kernel when the daemon goes away.
 *
 * A connection per socket: a region's rings have one consumer, and a socket
 * is the unit an application hands to a thread or a child.
 *
 * The eventfd as a level: the daemon signals it once per nc_client_arm() when
 * a datagram comes to an empty ring. The library keeps one frame taken ahead
 * (s->held) after each receive; when there is none, the ring is empty, and
 * it reads the eventfd to 0 and arms again (rearm()). So the eventfd counts
 * non-zero exactly while a datagram waits, or may: a level-triggered poller
 * wakes while there is something to read, and an edge-triggered one gets an
 * edge for each datagram that comes to an empty socket.
 *
 * libnetchannel's own calls (its control socket, its eventfd) come through
 * these wrappers too: they are not the application's sockets, and pass.
 */
/* fcntl() and fcntl64() are two symbols to define, not one name for the other. */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "netchannel.h"

#define EXPORT __attribute__((visibility("default")))

/* Channels of one socket: a wildcard bind's, one per local address. */
#define MAX_CH 32
/* Buffers of one frame held: a reassembled datagram of 64 KiB in 2 KiB buffers, and some. */
#define MAX_SEG 64
/* Rules of preloaded sockets win over the operator's catch-alls, not over each other. */
#define PRIO_BASE 1000u
/* Where a source address for a destination is remembered (wildcard sockets, no pktinfo). */
#define SRC_CACHE 16

/* A local address a socket has a channel for. */
struct chan {
	struct nc_channel *ch;
	uint32_t id;
	int family;                 /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned int ifindex;
};

/* A remembered source address for a destination. */
struct src_entry {
	struct sockaddr_storage dst;
	uint8_t src[16];
	int valid;
};

/* One application socket on channels. */
struct psock {
	pthread_mutex_t mu;
	int refs;                   /* application descriptors naming it (dup()) */
	int kfd;                    /* the kernel socket */
	int efd;                    /* the connection's eventfd (the client's) */
	int ctlfd;                  /* the connection's control socket */
	pid_t pid;                  /* whose connection c is */
	uid_t uid;                  /* the user it was made as */
	unsigned int prio_bump;     /* over the base priority: a child's, to take the flows */
	int inherited;              /* after_fork_child()'s mark */
	int family;                 /* of the socket */
	int v6only;
	int reuseport;              /* SO_REUSEPORT: its channels are shared with its user's others */
	int nonblock;
	int pktinfo4, pktinfo6;
	int64_t rcvtimeo_ms;        /* SO_RCVTIMEO; 0: none */
	int gone;                   /* the daemon went: the kernel socket carries on alone */
	uint16_t port;              /* bound port, host order */
	int connected;
	struct sockaddr_storage peer;
	struct nc_client *c;
	struct chan ch[MAX_CH];
	int nch;
	/* Connected: the channels it had before, kept for what was on its way to them. */
	struct chan wide[MAX_CH];
	int nwide;
	struct nc_buf held[MAX_SEG];/* the next frame, taken ahead (see the top) */
	int nheld;
	uint16_t ip_id;
	struct src_entry srcs[SRC_CACHE];
	unsigned int src_next;
	uint64_t bad_csum, bad_frame, not_peer, kernel_tx, kernel_rx, chan_rx;
};

/* The real calls. */
static int (*r_socket)(int, int, int);
static int (*r_bind)(int, const struct sockaddr *, socklen_t);
static int (*r_connect)(int, const struct sockaddr *, socklen_t);
static int (*r_close)(int);
static int (*r_dup)(int);
static int (*r_dup2)(int, int);
static int (*r_dup3)(int, int, int);
static int (*r_fcntl)(int, int, ...);
static int (*r_ioctl)(int, unsigned long, ...);
static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_readv)(int, const struct iovec *, int);
static ssize_t (*r_writev)(int, const struct iovec *, int);
static ssize_t (*r_recv)(int, void *, size_t, int);
static ssize_t (*r_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*r_recvmsg)(int, struct msghdr *, int);
static int (*r_recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);
static ssize_t (*r_send)(int, const void *, size_t, int);
static ssize_t (*r_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
static ssize_t (*r_sendmsg)(int, const struct msghdr *, int);
static int (*r_sendmmsg)(int, struct mmsghdr *, unsigned int, int);
static int (*r_getsockname)(int, struct sockaddr *, socklen_t *);
static int (*r_getpeername)(int, struct sockaddr *, socklen_t *);
static int (*r_getsockopt)(int, int, int, void *, socklen_t *);
static int (*r_setsockopt)(int, int, int, const void *, socklen_t);
static int (*r_shutdown)(int, int);
static int (*r_poll)(struct pollfd *, nfds_t, int);
static int (*r_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
static int (*r_epoll_ctl)(int, int, int, struct epoll_event *);
static int (*r_setuid)(uid_t);
static int (*r_seteuid)(uid_t);
static int (*r_setreuid)(uid_t, uid_t);
static int (*r_setresuid)(uid_t, uid_t, uid_t);

/* The next definition of name (libc's, or a sanitizer's), looked up at its first use. */
static void *
real_sym(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_RELAXED);

	if (p == NULL) {
		p = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, p, __ATOMIC_RELAXED);
	}
	return p;
}

#define REAL(f) ((__typeof__(r_##f))real_sym((void **)&r_##f, #f))

/* Application descriptor -> its socket; a descriptor examined once and left to the kernel. */
static struct psock **tab;
static uint8_t *passed;
static int tabn;
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static int verbose;
static int disabled;
static const char *sock_path;
static unsigned int prio_base = PRIO_BASE;
static uint16_t tx_port;
static atomic_uint name_seq;
/* This process (a child of fork() sets it: getpid() is a system call). */
static pid_t mypid;
/* The connection being made: its control socket, seen by socket() below. */
static __thread int *making_ctlfd;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	if (!verbose)
		return;
	n = snprintf(line, sizeof(line), "netchannel-preload[%d]: ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!REAL(write)(2, line, (size_t)n);
}

static void
table_init(void)
{
	struct rlimit rl;
	const char *v;

	if (tab != NULL)
		return;
	pthread_mutex_lock(&tab_mu);
	if (tab == NULL) {
		int n = 65536;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
		    rl.rlim_max < 1u << 20)
			n = rl.rlim_max > 1024 ? (int)rl.rlim_max : 1024;
		passed = calloc((size_t)n, 1);
		tab = calloc((size_t)n, sizeof(*tab));
		tabn = tab != NULL && passed != NULL ? n : 0;
		v = getenv("NETCHANNEL_PRELOAD_VERBOSE");
		verbose = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
		v = getenv("NETCHANNEL_PRELOAD_DISABLE");
		disabled = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
		sock_path = getenv("NETCHANNELD_SOCKET");
		if (sock_path == NULL || *sock_path == '\0')
			sock_path = NC_DEFAULT_SOCKET;
		v = getenv("NETCHANNEL_PRELOAD_PORT");
		if (v != NULL)
			tx_port = (uint16_t)strtoul(v, NULL, 10);
		v = getenv("NETCHANNEL_PRELOAD_PRIORITY");
		if (v != NULL)
			prio_base = (unsigned int)strtoul(v, NULL, 10);
	}
	pthread_mutex_unlock(&tab_mu);
}

/* The socket of application descriptor fd, or NULL. */
static inline struct psock *
lookup(int fd)
{
	return fd >= 0 && fd < tabn ? tab[fd] : NULL;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- Addresses ---- */

static int
is_mapped(const struct in6_addr *a)
{
	return IN6_IS_ADDR_V4MAPPED(a);
}

/* The family and address of sockaddr sa (an IPv4-mapped IPv6 one as IPv4), and its port. */
static int
addr_of(const struct sockaddr *sa, uint8_t addr[16], uint16_t *port)
{
	memset(addr, 0, 16);
	*port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;

		memcpy(addr, &s->sin_addr, 4);
		*port = ntohs(s->sin_port);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;

		*port = ntohs(s->sin6_port);
		if (is_mapped(&s->sin6_addr)) {
			memcpy(addr, &s->sin6_addr.s6_addr[12], 4);
			return AF_INET;
		}
		memcpy(addr, &s->sin6_addr, 16);
		return AF_INET6;
	}
	return -1;
}

/* sockaddr of (family, addr, port) as socket s's family has it (IPv4 mapped on an IPv6 one). */
static socklen_t
sockaddr_make(const struct psock *s, int family, const uint8_t *addr, uint16_t port,
	      struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (s->family == AF_INET) {
		struct sockaddr_in *a = (void *)out;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		memcpy(&a->sin_addr, addr, 4);
		return sizeof(*a);
	}
	struct sockaddr_in6 *a = (void *)out;

	a->sin6_family = AF_INET6;
	a->sin6_port = htons(port);
	if (family == AF_INET) {
		a->sin6_addr.s6_addr[10] = 0xff;
		a->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&a->sin6_addr.s6_addr[12], addr, 4);
	} else {
		memcpy(&a->sin6_addr, addr, 16);
	}
	return sizeof(*a);
}

static int
addr_len(int family)
{
	return family == AF_INET ? 4 : 16;
}

static int
is_zero(const uint8_t *a, int len)
{
	for (int i = 0; i < len; i++)
		if (a[i])
			return 0;
	return 1;
}

/* ---- Checksums ---- */

static uint32_t
sum16(uint32_t sum, const uint8_t *p, size_t len, int *odd)
{
	size_t i = 0;

	if (*odd && len > 0) {
		sum += p[0];
		i = 1;
		*odd = 0;
	}
	for (; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (i < len) {
		sum += (uint32_t)p[i] << 8;
		*odd = 1;
	}
	return sum;
}

static uint16_t
fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* The pseudo header's sum for UDP of len bytes between src and dst. */
static uint32_t
pseudo_sum(int family, const uint8_t *src, const uint8_t *dst, uint32_t len)
{
	int odd = 0;
	uint32_t sum = sum16(0, src, (size_t)addr_len(family), &odd);

	sum = sum16(sum, dst, (size_t)addr_len(family), &odd);
	return sum + IPPROTO_UDP + (len >> 16) + (len & 0xffff);
}

/* ---- Frames ---- */

/* A received datagram, parsed. */
struct dgram {
	int family;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	uint32_t ch;                /* the channel's id */
	size_t off;                 /* the payload's offset in the first buffer */
	size_t len;                 /* the payload's length */
};

/* Bytes [off, off + len) of the held frame, gathered across its buffers, into iov. */
static size_t
frame_copy(const struct psock *s, size_t off, size_t len, const struct iovec *iov, size_t niov)
{
	size_t done = 0, vi = 0, vo = 0;

	for (int k = 0; k < s->nheld && done < len; k++) {
		size_t blen = s->held[k].len;
		const uint8_t *p = s->held[k].data;

		if (off >= blen) {
			off -= blen;
			continue;
		}
		p += off;
		blen -= off;
		off = 0;
		while (blen > 0 && done < len && vi < niov) {
			size_t room = iov[vi].iov_len - vo, n = blen;

			if (n > room)
				n = room;
			if (n > len - done)
				n = len - done;
			memcpy((uint8_t *)iov[vi].iov_base + vo, p, n);
			p += n;
			blen -= n;
			done += n;
			vo += n;
			if (vo == iov[vi].iov_len) {
				vi++;
				vo = 0;
			}
		}
		if (vi == niov)
			break;
	}
	return done;
}

/* The UDP checksum of the held frame's datagram (UDP header at udp_off, ulen bytes): 0 is good. */
static uint16_t
frame_csum(const struct psock *s, const struct dgram *g, size_t udp_off, uint32_t ulen)
{
	uint32_t sum = pseudo_sum(g->family, g->src, g->dst, ulen);
	size_t left = ulen, off = udp_off;
	int odd = 0;

	for (int k = 0; k < s->nheld && left > 0; k++) {
		size_t blen = s->held[k].len;

		if (off >= blen) {
			off -= blen;
			continue;
		}
		blen -= off;
		if (blen > left)
			blen = left;
		sum = sum16(sum, (const uint8_t *)s->held[k].data + off, blen, &odd);
		left -= blen;
		off = 0;
		/* Fold now and then: 64 KiB of 16-bit words overflow 32 bits otherwise. */
		sum = (sum & 0xffff) + (sum >> 16);
	}
	return (uint16_t)~fold(sum);
}

static size_t
frame_len(const struct psock *s)
{
	size_t n = 0;

	for (int k = 0; k < s->nheld; k++)
		n += s->held[k].len;
	return n;
}

/*
 * Parse the held frame: Ethernet, IPv4 or IPv6 (extension headers skipped),
 * UDP with its checksum. 0, or -1 for a frame that is not a good datagram.
 */
static int
frame_parse(struct psock *s, struct dgram *g)
{
	const uint8_t *p = s->held[0].data;
	size_t blen = s->held[0].len, total = frame_len(s), l3 = 14, udp;
	uint32_t ulen;
	uint16_t et;

	if (blen < 14 + 8)
		return -1;
	et = (uint16_t)(p[12] << 8 | p[13]);
	g->ch = s->held[0].channel;
	if (et == 0x0800) {
		size_t ihl;
		uint32_t tot;

		if (blen < l3 + 20 || (p[l3] >> 4) != 4)
			return -1;
		ihl = (size_t)(p[l3] & 0xf) * 4;
		tot = (uint32_t)(p[l3 + 2] << 8 | p[l3 + 3]);
		if (ihl < 20 || p[l3 + 9] != IPPROTO_UDP || tot < ihl + 8 || l3 + tot > total ||
		    (p[l3 + 6] & 0x3f) != 0 || p[l3 + 7] != 0)
			return -1;
		g->family = AF_INET;
		memcpy(g->src, p + l3 + 12, 4);
		memcpy(g->dst, p + l3 + 16, 4);
		udp = l3 + ihl;
		ulen = tot - (uint32_t)ihl;
	} else if (et == 0x86dd) {
		uint8_t nh;
		uint32_t plen;

		if (blen < l3 + 40 || (p[l3] >> 4) != 6)
			return -1;
		plen = (uint32_t)(p[l3 + 4] << 8 | p[l3 + 5]);
		nh = p[l3 + 6];
		g->family = AF_INET6;
		memcpy(g->src, p + l3 + 8, 16);
		memcpy(g->dst, p + l3 + 24, 16);
		udp = l3 + 40;
		/* Hop-by-hop, routing, destination options: skipped; a fragment: not whole. */
		while (nh == 0 || nh == 43 || nh == 60) {
			size_t hl;

			if (blen < udp + 8)
				return -1;
			hl = ((size_t)p[udp + 1] + 1) * 8;
			nh = p[udp];
			udp += hl;
		}
		if (nh != IPPROTO_UDP || l3 + 40 + plen > total || udp - l3 - 40 > plen)
			return -1;
		ulen = plen - (uint32_t)(udp - l3 - 40);
	} else {
		return -1;
	}
	if (blen < udp + 8 || ulen < 8)
		return -1;
	g->sport = (uint16_t)(p[udp] << 8 | p[udp + 1]);
	g->dport = (uint16_t)(p[udp + 2] << 8 | p[udp + 3]);
	if ((uint32_t)(p[udp + 4] << 8 | p[udp + 5]) != ulen)
		return -1;
	/* A checksum of 0: none (IPv4 only; IPv6 must have one). */
	if ((p[udp + 6] | p[udp + 7]) != 0 || g->family == AF_INET6) {
		if (frame_csum(s, g, udp, ulen) != 0) {
			s->bad_csum++;
			return -2;
		}
	}
	g->off = udp + 8;
	g->len = ulen - 8;
	return 0;
}

static void
frame_release(struct psock *s)
{
	if (s->nheld > 0)
		nc_bufs_release(s->c, s->held, (uint16_t)s->nheld);
	s->nheld = 0;
}

/* Whether datagram g came on one of a connected socket's wide channels from another than its peer. */
static int
wide_not_peer(const struct psock *s, const struct dgram *g)
{
	uint8_t pa[16];
	uint16_t pp;
	int pf;

	for (int i = 0; i < s->nwide; i++) {
		if (s->wide[i].id != g->ch)
			continue;
		pf = addr_of((const struct sockaddr *)&s->peer, pa, &pp);
		return pf != g->family || pp != g->sport ||
		       memcmp(pa, g->src, (size_t)addr_len(pf)) != 0;
	}
	return 0;
}

/*
 * Take the next good frame from the ring into s->held (if none is held), its
 * datagram in *g: 1, or 0 when the ring is empty. Bad frames, and others'
 * datagrams for a connected socket, are counted and given back.
 */
static int
frame_take(struct psock *s, struct dgram *g)
{
	for (;;) {
		struct nc_buf b;
		int ret;

		if (s->nheld == 0) {
			if (nc_client_rx_bufs(s->c, &b, 1) != 1)
				return 0;
			s->held[s->nheld++] = b;
			while ((b.flags & NC_BUF_F_MORE) && s->nheld < MAX_SEG &&
			       nc_client_rx_bufs(s->c, &b, 1) == 1)
				s->held[s->nheld++] = b;
			/* A frame longer than we hold: give back the rest of it too. */
			while (b.flags & NC_BUF_F_MORE && nc_client_rx_bufs(s->c, &b, 1) == 1) {
				nc_bufs_release(s->c, &b, 1);
				s->held[MAX_SEG - 1].flags |= NC_BUF_F_MORE;
			}
		}
		if (s->held[s->nheld - 1].flags & NC_BUF_F_MORE)
			ret = -1;
		else
			ret = frame_parse(s, g);
		if (ret == 0 && s->nwide > 0 && wide_not_peer(s, g)) {
			s->not_peer++;
			ret = -3;
		}
		if (ret == 0)
			return 1;
		if (ret == -1)
			s->bad_frame++;
		frame_release(s);
	}
}

/* The ring is empty: make the eventfd say so, and ask for a signal at the next datagram. */
static void
rearm(struct psock *s)
{
	uint64_t v;

	if (s->gone)
		return;
	(void)!REAL(read)(s->efd, &v, sizeof(v));
	if (nc_client_arm(s->c) > 0) {
		v = 1;
		(void)!REAL(write)(s->efd, &v, sizeof(v));
	}
}

/* ---- Channels ---- */

static const struct chan *
chan_by_id(const struct psock *s, uint32_t id)
{
	for (int i = 0; i < s->nch; i++)
		if (s->ch[i].id == id)
			return &s->ch[i];
	for (int i = 0; i < s->nwide; i++)
		if (s->wide[i].id == id)
			return &s->wide[i];
	return NULL;
}

static const struct chan *
chan_by_addr(const struct psock *s, int family, const uint8_t *addr)
{
	for (int i = 0; i < s->nch; i++)
		if (s->ch[i].family == family &&
		    memcmp(s->ch[i].addr, addr, (size_t)addr_len(family)) == 0)
			return &s->ch[i];
	return NULL;
}

static void
channels_drop(struct psock *s)
{
	frame_release(s);
	for (int i = 0; i < s->nch; i++)
		nc_channel_destroy(s->ch[i].ch);
	for (int i = 0; i < s->nwide; i++)
		nc_channel_destroy(s->wide[i].ch);
	s->nch = s->nwide = 0;
}

/* A channel of s for local address addr (and, connected, from the peer). 0 or -errno. */
static int
channel_add(struct psock *s, int family, const uint8_t *addr, unsigned int ifindex)
{
	struct nc_rule r = NC_SIZED(nc_rule);
	struct nc_channel_opts o = NC_SIZED(nc_channel_opts, .tx = 1, .port = tx_port);
	struct chan *c = &s->ch[s->nch];
	char name[NC_CHANNEL_NAME_SIZE];
	uint8_t paddr[16];
	uint16_t pport;

	if (s->nch == MAX_CH)
		return -E2BIG;
	r.family = family == AF_INET ? NC_AF_INET : NC_AF_INET6;
	r.proto = IPPROTO_UDP;
	r.proto_mask = 0xff;
	memcpy(r.dst, addr, (size_t)addr_len(family));
	r.dst_len = (uint8_t)(addr_len(family) * 8);
	r.dport = (struct nc_port){ .lo = s->port, .hi = s->port, .kind = NC_PORT_RANGE };
	r.priority = prio_base + s->prio_bump;
	if (s->connected) {
		int pf = addr_of((const struct sockaddr *)&s->peer, paddr, &pport);

		if (pf != family)
			return 0;   /* the peer is of the other family: no flows to this address */
		memcpy(r.src, paddr, (size_t)addr_len(family));
		r.src_len = r.dst_len;
		r.sport = (struct nc_port){ .lo = pport, .hi = pport, .kind = NC_PORT_RANGE };
		r.priority += 2;
	}
	/* SO_REUSEPORT: the group's sockets share the flows, as the kernel's; a connected one's own. */
	o.shared = s->reuseport && !s->connected;
	snprintf(name, sizeof(name), "pl%d.%u", (int)getpid(), atomic_fetch_add(&name_seq, 1));
	c->ch = nc_channel_create(s->c, name, &r, &o);
	if (c->ch == NULL)
		return -errno;
	c->id = nc_channel_id(c->ch);
	c->family = family;
	memcpy(c->addr, addr, 16);
	c->ifindex = ifindex;
	s->nch++;
	return 0;
}

/* The local addresses a bind to addr covers (each with its interface), as channels. 0 or -errno. */
static int
channels_make(struct psock *s, int family, const uint8_t *addr)
{
	struct ifaddrs *ifa, *i;
	int ret = 0, any = is_zero(addr, addr_len(family));

	if (getifaddrs(&ifa) != 0)
		return -errno;
	for (i = ifa; i != NULL && ret == 0; i = i->ifa_next) {
		uint8_t a[16] = { 0 };
		int f;

		if (i->ifa_addr == NULL || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		f = i->ifa_addr->sa_family;
		if (f == AF_INET)
			memcpy(a, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		else if (f == AF_INET6)
			memcpy(a, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
		else
			continue;
		if (any) {
			/* An IPv6 wildcard takes IPv4 too, unless IPV6_V6ONLY. */
			if (f != family && !(family == AF_INET6 && f == AF_INET && !s->v6only))
				continue;
		} else if (f != family || memcmp(a, addr, (size_t)addr_len(f)) != 0) {
			continue;
		}
		if (chan_by_addr(s, f, a) == NULL)
			ret = channel_add(s, f, a, if_nametoindex(i->ifa_name));
	}
	freeifaddrs(ifa);
	if (ret == 0 && s->nch == 0)
		ret = -EADDRNOTAVAIL;
	return ret;
}

/* ---- Sockets ---- */

static void
psock_free(struct psock *s)
{
	if (s->c != NULL) {
		frame_release(s);
		if (verbose && s->kfd >= 0)
			say("socket port %u closed: %" PRIu64 " received on channels, %" PRIu64
			    " bad checksums, %" PRIu64 " bad frames, %" PRIu64 " not from the "
			    "connected peer, %" PRIu64 " sent and %" PRIu64 " received by the kernel",
			    s->port, s->chan_rx, s->bad_csum, s->bad_frame, s->not_peer, s->kernel_tx,
			    s->kernel_rx);
		nc_disconnect(s->c);
	}
	if (s->kfd >= 0)
		REAL(close)(s->kfd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static void
psock_unref(struct psock *s)
{
	pthread_mutex_lock(&tab_mu);
	int last = --s->refs == 0;

	pthread_mutex_unlock(&tab_mu);
	if (last)
		psock_free(s);
}

/* What the application's socket fd asked of the kernel so far, read from it. */
static void
options_read(struct psock *s, int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);
	struct timeval tv;
	int fl = REAL(fcntl)(fd, F_GETFL);

	s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	if (s->family == AF_INET6 &&
	    REAL(getsockopt)(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &l) == 0)
		s->v6only = v;
	l = sizeof(v);
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_REUSEPORT, &v, &l) == 0)
		s->reuseport = v;
	l = sizeof(v);
	if (REAL(getsockopt)(fd, IPPROTO_IP, IP_PKTINFO, &v, &l) == 0)
		s->pktinfo4 = v;
	l = sizeof(v);
	if (s->family == AF_INET6 &&
	    REAL(getsockopt)(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &v, &l) == 0)
		s->pktinfo6 = v;
	l = sizeof(tv);
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) == 0)
		s->rcvtimeo_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Descriptor fd becomes another name of target's file, keeping its own close-on-exec. */
static int
replace_fd(int target, int fd)
{
	int fl = REAL(fcntl)(fd, F_GETFD);

	return REAL(dup3)(target, fd, fl > 0 && (fl & FD_CLOEXEC) ? O_CLOEXEC : 0);
}

/*
 * Put socket fd (bound in the kernel already, and connected if it is) on
 * channels. 0: fd is the eventfd now, the kernel socket in s->kfd; else
 * -errno, and fd is what it was.
 */
static int
offload(int fd)
{
	struct sockaddr_storage local;
	socklen_t l = sizeof(local);
	struct psock *s;
	uint8_t addr[16];
	int family, efd, ret;
	uint16_t port;

	if (disabled || fd >= tabn)
		return -ENOTSUP;
	if (REAL(getsockname)(fd, (struct sockaddr *)&local, &l) != 0)
		return -errno;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	s->refs = 1;
	s->kfd = -1;
	s->ctlfd = -1;
	s->pid = getpid();
	s->uid = geteuid();
	s->family = local.ss_family;
	options_read(s, fd);
	family = addr_of((struct sockaddr *)&local, addr, &port);
	s->port = port;
	l = sizeof(s->peer);
	s->connected = REAL(getpeername)(fd, (struct sockaddr *)&s->peer, &l) == 0;
	making_ctlfd = &s->ctlfd;
	s->c = nc_connect(sock_path, NC_CONNECT_ONE_RING);
	making_ctlfd = NULL;
	if (s->c == NULL) {
		ret = -errno;
		say("socket %d (port %u): no connection to %s: %s; the kernel keeps it", fd, port,
		    sock_path, nc_strerror(ret));
		goto fail;
	}
	ret = channels_make(s, family, addr);
	if (ret != 0) {
		say("socket %d (port %u): no channel: %s%s%s; the kernel keeps it", fd, port,
		    nc_strerror(ret), *nc_last_reason() ? ": " : "", nc_last_reason());
		goto fail;
	}
	efd = nc_client_fd(s->c);
	if (efd < 0 || nc_client_arm(s->c) < 0) {
		ret = efd < 0 ? efd : -EIO;
		say("socket %d: no eventfd: %s; the kernel keeps it", fd, nc_strerror(ret));
		goto fail;
	}
	s->efd = efd;
	/* The kernel socket out of the way; the eventfd in its place, with its close-on-exec. */
	s->kfd = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, tabn / 2 > 64 ? tabn / 2 : 64);
	if (s->kfd < 0)
		s->kfd = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0);
	if (s->kfd < 0) {
		ret = -errno;
		goto fail;
	}
	if (replace_fd(efd, fd) < 0) {
		ret = -errno;
		goto fail;
	}
	pthread_mutex_lock(&tab_mu);
	tab[fd] = s;
	passed[fd] = 0;
	pthread_mutex_unlock(&tab_mu);
	say("socket %d: port %u on %d channel(s)%s", fd, port, s->nch,
	    s->connected ? ", connected" : "");
	return 0;
fail:
	if (s->kfd >= 0)
		REAL(close)(s->kfd);
	s->kfd = -1;
	psock_free(s);
	return ret;
}

/* Whether fd is a UDP socket of IPv4 or IPv6 (the kind this library takes). */
static int
is_udp(int fd)
{
	int type = 0, domain = 0, proto = 0;
	socklen_t l = sizeof(int);

	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0 || type != SOCK_DGRAM)
		return 0;
	l = sizeof(int);
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0 ||
	    (domain != AF_INET && domain != AF_INET6))
		return 0;
	l = sizeof(int);
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) != 0 ||
	    proto != IPPROTO_UDP)
		return 0;
	return 1;
}

/* Forget what was known of descriptor fd (closed, or another file now). */
static void
forget(int fd)
{
	struct psock *s;

	if (fd < 0 || fd >= tabn)
		return;
	pthread_mutex_lock(&tab_mu);
	s = tab[fd];
	tab[fd] = NULL;
	passed[fd] = 0;
	pthread_mutex_unlock(&tab_mu);
	if (s != NULL)
		psock_unref(s);
}

/*
 * Socket s leaves the channels for good: each of its descriptors becomes the
 * kernel socket (a descriptor it was not, the library forgets), and its
 * connection closes (a parent's, which is not ours, is only let go of).
 */
static void
to_kernel(struct psock *s, int ours)
{
	for (int k = 0; k < tabn; k++) {
		if (tab[k] != s)
			continue;
		replace_fd(s->kfd, k);
		pthread_mutex_lock(&tab_mu);
		tab[k] = NULL;
		passed[k] = 1;
		pthread_mutex_unlock(&tab_mu);
	}
	if (!ours)
		s->c = NULL;
	s->refs = 1;
	pthread_mutex_unlock(&s->mu);
	psock_unref(s);
}

/*
 * Socket s (its lock held) on a connection of this process and user: a child
 * of fork()'s first use of a socket it inherited (child: the parent's
 * connection stays the parent's, and the child's rules go one priority above,
 * so that the child takes the flows; a second child, one above that), or a
 * process that changed its user (its channels made again as the new user's).
 * 0 with the lock still held; or -errno, the socket gone to the kernel and
 * the lock let go of with it.
 */
static int
reown(struct psock *s, int child)
{
	struct chan old[MAX_CH];
	int nold = s->nch, ret = 0, efd;

	memcpy(old, s->ch, sizeof(old));
	s->nch = 0;
	/* A connected socket's wide channels: what they bring is the old connection's. */
	s->nwide = 0;
	if (!child && s->c != NULL) {
		/* Another user now: its channels may not take the old user's flows, so they go first. */
		frame_release(s);
		nc_disconnect(s->c);
		s->c = NULL;
	}
	s->pid = getpid();
	s->uid = geteuid();
	s->ctlfd = -1;
	making_ctlfd = &s->ctlfd;
	s->c = nc_connect(sock_path, NC_CONNECT_ONE_RING);
	making_ctlfd = NULL;
	if (s->c == NULL) {
		ret = -errno;
		say("socket port %u: no connection to %s for %s: %s; the kernel takes it", s->port,
		    sock_path, child ? "a child" : "the new user", nc_strerror(ret));
		to_kernel(s, 0);
		return ret;
	}
	for (int i = 0; i < nold && ret == 0; i++) {
		for (s->prio_bump = child ? s->prio_bump + 1 : s->prio_bump;
		     (ret = channel_add(s, old[i].family, old[i].addr, old[i].ifindex)) == -EBUSY &&
		     child && s->prio_bump < 16; s->prio_bump++)
			;
	}
	efd = ret == 0 ? nc_client_fd(s->c) : ret;
	if (efd < 0 || nc_client_arm(s->c) < 0) {
		ret = efd < 0 ? efd : -EIO;
		say("socket port %u: no channel for %s (uid %u): %s%s%s; the kernel takes it",
		    s->port, child ? "a child" : "the new user", (unsigned int)geteuid(),
		    nc_strerror(ret), *nc_last_reason() ? ": " : "", nc_last_reason());
		to_kernel(s, 1);
		return ret;
	}
	s->efd = efd;
	s->gone = 0;
	for (int k = 0; k < tabn; k++)
		if (tab[k] == s)
			replace_fd(efd, k);
	say("socket port %u: on %d channel(s) of %s (pid %d, uid %u, priority +%u)", s->port, s->nch,
	    child ? "a child" : "the new user", (int)s->pid, (unsigned int)geteuid(),
	    s->prio_bump);
	return 0;
}

/* A child of fork(): nothing of the parent's connections is its to keep open. */
static void
after_fork_child(void)
{
	mypid = getpid();
	for (int fd = 0; fd < tabn; fd++) {
		struct psock *s = tab[fd];

		if (s == NULL || s->inherited)
			continue;
		/*
		 * Its copies of the parent's control socket and eventfd would keep the
		 * parent's channels after the parent closed them. The descriptors the
		 * program has stay the parent's eventfd until the child first uses them
		 * (reown()). Nor is the parent's client (s->c) the child's to use or free:
		 * a child that closes the socket unused leaves the parent's connection
		 * alone. The lock may have been held by a thread the child has not.
		 */
		s->inherited = 1;
		if (s->ctlfd >= 0)
			REAL(close)(s->ctlfd);
		if (s->efd >= 0)
			REAL(close)(s->efd);
		s->ctlfd = s->efd = -1;
		s->c = NULL;
		s->nheld = 0;
		pthread_mutex_init(&s->mu, NULL);
	}
	for (int fd = 0; fd < tabn; fd++)
		if (tab[fd] != NULL)
			tab[fd]->inherited = 0;
}

/*
 * The socket of application descriptor fd, on a connection of this process:
 * a child's first use of an inherited one makes its own (reown()). NULL for
 * a descriptor that is not (or no longer) one of ours.
 */
static inline struct psock *
get(int fd)
{
	struct psock *s = lookup(fd);

	if (__builtin_expect(s != NULL && s->pid != mypid, 0)) {
		pthread_mutex_lock(&s->mu);
		if (s->pid != mypid && reown(s, 1) != 0)
			return NULL;
		pthread_mutex_unlock(&s->mu);
		s = lookup(fd);
	}
	return s;
}

/* The process's user changed: each socket's channels, the new user's. */
static void
user_changed(void)
{
	for (int fd = 0; fd < tabn; fd++) {
		struct psock *s = lookup(fd);

		/* An inherited socket is made the new user's at its first use (reown()): a child
		 * that never uses it does not take its flows. */
		if (s == NULL || s->pid != mypid || s->gone || s->c == NULL || s->uid == geteuid())
			continue;
		pthread_mutex_lock(&s->mu);
		if (reown(s, 0) == 0)
			pthread_mutex_unlock(&s->mu);
	}
}

/* What a call that may have changed the user returned (ret), after user_changed() if it did. */
static int
uid_call(int ret)
{
	int err = errno;

	if (ret == 0)
		user_changed();
	errno = err;
	return ret;
}

EXPORT int
setuid(uid_t u)
{
	return uid_call(REAL(setuid)(u));
}

EXPORT int
seteuid(uid_t u)
{
	return uid_call(REAL(seteuid)(u));
}

EXPORT int
setreuid(uid_t r, uid_t e)
{
	return uid_call(REAL(setreuid)(r, e));
}

EXPORT int
setresuid(uid_t r, uid_t e, uid_t saved)
{
	return uid_call(REAL(setresuid)(r, e, saved));
}

__attribute__((constructor)) static void
preload_init(void)
{
	table_init();
	mypid = getpid();
	pthread_atfork(NULL, NULL, after_fork_child);
	say("on; daemon socket %s", sock_path);
}

/* The daemon went: the socket carries on on the kernel. */
static void
went(struct psock *s, int err)
{
	if (s->gone)
		return;
	s->gone = 1;
	frame_release(s);
	say("socket port %u: the daemon went (%s); the kernel carries on", s->port,
	    nc_strerror(err));
}

/* ---- Receive ---- */

/*
 * Put the held datagram g into msg (name, data, control) as recvmsg() would:
 * the payload's length (or what was copied, without MSG_TRUNC).
 */
static ssize_t
deliver(struct psock *s, const struct dgram *g, struct msghdr *msg, int flags)
{
	size_t room = 0, n;
	const struct chan *c = chan_by_id(s, g->ch);

	for (size_t i = 0; i < msg->msg_iovlen; i++)
		room += msg->msg_iov[i].iov_len;
	n = frame_copy(s, g->off, g->len, msg->msg_iov, msg->msg_iovlen);
	msg->msg_flags = 0;
	if (g->len > room)
		msg->msg_flags |= MSG_TRUNC;
	if (msg->msg_name != NULL) {
		struct sockaddr_storage a;
		socklen_t al = sockaddr_make(s, g->family, g->src, g->sport, &a);

		memcpy(msg->msg_name, &a, msg->msg_namelen < al ? msg->msg_namelen : al);
		msg->msg_namelen = al;
	}
	if (msg->msg_control != NULL) {
		size_t used = 0;
		int want4 = g->family == AF_INET && s->pktinfo4;
		int want6 = s->family == AF_INET6 && s->pktinfo6;

		if (want4 && msg->msg_controllen >= CMSG_SPACE(sizeof(struct in_pktinfo))) {
			struct in_pktinfo pi = { .ipi_ifindex = c != NULL ? (int)c->ifindex : 0 };
			struct cmsghdr *cm = msg->msg_control;

			memcpy(&pi.ipi_spec_dst, g->dst, 4);
			memcpy(&pi.ipi_addr, g->dst, 4);
			cm->cmsg_level = IPPROTO_IP;
			cm->cmsg_type = IP_PKTINFO;
			cm->cmsg_len = CMSG_LEN(sizeof(pi));
			memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
			used += CMSG_SPACE(sizeof(pi));
		} else if (want4) {
			msg->msg_flags |= MSG_CTRUNC;
		}
		/* An IPv6 socket's IPV6_PKTINFO: an IPv4 datagram's addresses mapped. */
		if (want6 && msg->msg_controllen - used >= CMSG_SPACE(sizeof(struct in6_pktinfo))) {
			struct in6_pktinfo pi = { .ipi6_ifindex = c != NULL ? c->ifindex : 0 };
			struct cmsghdr *cm = (struct cmsghdr *)((uint8_t *)msg->msg_control + used);
			struct sockaddr_storage a;

			sockaddr_make(s, g->family, g->dst, 0, &a);
			pi.ipi6_addr = ((struct sockaddr_in6 *)&a)->sin6_addr;
			cm->cmsg_level = IPPROTO_IPV6;
			cm->cmsg_type = IPV6_PKTINFO;
			cm->cmsg_len = CMSG_LEN(sizeof(pi));
			memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
			used += CMSG_SPACE(sizeof(pi));
		} else if (want6) {
			msg->msg_flags |= MSG_CTRUNC;
		}
		msg->msg_controllen = used;
	}
	return (ssize_t)((flags & MSG_TRUNC) ? g->len : n);
}

/*
 * One receive without waiting: from the ring, else from the kernel socket.
 * The datagram's length, or -errno (-EAGAIN: nothing).
 */
static ssize_t
recv_once(struct psock *s, struct msghdr *msg, int flags)
{
	struct dgram g;
	ssize_t n;

	if (!s->gone && frame_take(s, &g)) {
		n = deliver(s, &g, msg, flags);
		if (!(flags & MSG_PEEK)) {
			frame_release(s);
			s->chan_rx++;
			/* Take the next one ahead: none means the ring is empty (the top). */
			if (!frame_take(s, &g))
				rearm(s);
		}
		return n;
	}
	if (!s->gone)
		rearm(s);
	n = REAL(recvmsg)(s->kfd, msg, (flags & ~MSG_WAITALL) | MSG_DONTWAIT);
	if (n >= 0) {
		s->kernel_rx++;
		return n;
	}
	return -errno;
}

/* Sleep until s may have a datagram, or timeout_ms (-1: for ever). 0, or -errno. */
static int
wait_readable(struct psock *s, int timeout_ms)
{
	struct pollfd p[3] = { { .fd = s->efd, .events = POLLIN },
			       { .fd = s->kfd, .events = POLLIN },
			       { .fd = s->ctlfd, .events = POLLIN } };
	int n = s->gone ? 1 : s->ctlfd >= 0 ? 3 : 2;
	int ret;

	if (s->gone)
		p[0] = p[1];
	ret = REAL(poll)(p, (nfds_t)n, timeout_ms);
	if (ret < 0)
		return -errno;
	if (ret == 0)
		return -EAGAIN;
	/* The control socket says something only when the daemon goes. */
	if (n == 3 && p[2].revents)
		went(s, EPIPE);
	return 0;
}

static ssize_t
recv_msg(struct psock *s, struct msghdr *msg, int flags)
{
	int64_t deadline = s->rcvtimeo_ms > 0 ? now_ms() + s->rcvtimeo_ms : 0;

	for (;;) {
		ssize_t n;
		int wait, ret;

		pthread_mutex_lock(&s->mu);
		n = recv_once(s, msg, flags);
		pthread_mutex_unlock(&s->mu);
		if (n != -EAGAIN || s->nonblock || (flags & MSG_DONTWAIT)) {
			if (n < 0) {
				errno = (int)-n;
				return -1;
			}
			return n;
		}
		wait = -1;
		if (deadline) {
			int64_t left = deadline - now_ms();

			if (left <= 0) {
				errno = EAGAIN;
				return -1;
			}
			wait = (int)left;
		}
		ret = wait_readable(s, wait);
		if (ret < 0 && ret != -EAGAIN) {
			errno = -ret;
			return -1;
		}
	}
}

/* ---- Send ---- */

static __thread uint8_t txbuf[65536 + 64];

/* The source address the kernel would pick for dst (a connect()ed probe), remembered. */
static int
src_for(struct psock *s, int family, const uint8_t *dst, uint8_t *src)
{
	struct sockaddr_storage d, l;
	socklen_t ll = sizeof(l);
	uint16_t port;
	int fd, ret;

	for (unsigned int i = 0; i < SRC_CACHE; i++) {
		struct src_entry *e = &s->srcs[i];
		uint8_t a[16];

		if (e->valid && addr_of((struct sockaddr *)&e->dst, a, &port) == family &&
		    memcmp(a, dst, (size_t)addr_len(family)) == 0) {
			memcpy(src, e->src, 16);
			return 0;
		}
	}
	memset(&d, 0, sizeof(d));
	if (family == AF_INET) {
		struct sockaddr_in *a = (void *)&d;

		a->sin_family = AF_INET;
		a->sin_port = htons(9);
		memcpy(&a->sin_addr, dst, 4);
	} else {
		struct sockaddr_in6 *a = (void *)&d;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(9);
		memcpy(&a->sin6_addr, dst, 16);
	}
	fd = REAL(socket)(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = REAL(connect)(fd, (struct sockaddr *)&d, family == AF_INET ?
			    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	if (ret == 0)
		ret = REAL(getsockname)(fd, (struct sockaddr *)&l, &ll);
	ret = ret == 0 ? 0 : -errno;
	REAL(close)(fd);
	if (ret != 0)
		return ret;
	addr_of((struct sockaddr *)&l, src, &port);
	struct src_entry *e = &s->srcs[s->src_next++ % SRC_CACHE];

	e->dst = d;
	memcpy(e->src, src, 16);
	e->valid = 1;
	return 0;
}

/* The source address msg's IP_PKTINFO or IPV6_PKTINFO asks for: 1 with it in src, else 0. */
static int
src_from_cmsg(const struct msghdr *msg, int family, uint8_t *src)
{
	if (msg->msg_control == NULL)
		return 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR((struct msghdr *)msg); cm != NULL;
	     cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		if (family == AF_INET && cm->cmsg_level == IPPROTO_IP &&
		    cm->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			if (pi.ipi_spec_dst.s_addr != 0) {
				memcpy(src, &pi.ipi_spec_dst, 4);
				return 1;
			}
		} else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			if (family == AF_INET6 && !IN6_IS_ADDR_UNSPECIFIED(&pi.ipi6_addr)) {
				memcpy(src, &pi.ipi6_addr, 16);
				return 1;
			}
			if (family == AF_INET && is_mapped(&pi.ipi6_addr)) {
				memcpy(src, &pi.ipi6_addr.s6_addr[12], 4);
				return 1;
			}
		}
	}
	return 0;
}

/* An IP packet of the datagram in txbuf: its length. */
static size_t
build(struct psock *s, int family, const uint8_t *src, const uint8_t *dst, uint16_t dport,
      const struct iovec *iov, size_t niov, size_t len)
{
	size_t hl = family == AF_INET ? 20 : 40, off = hl + 8;
	uint8_t *ip = txbuf, *udp = txbuf + hl;
	uint32_t ulen = (uint32_t)len + 8, sum;
	int odd = 0;

	for (size_t i = 0; i < niov; i++) {
		memcpy(txbuf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	if (family == AF_INET) {
		uint32_t tot = (uint32_t)(hl + ulen);

		ip[0] = 0x45;
		ip[1] = 0;
		ip[2] = (uint8_t)(tot >> 8);
		ip[3] = (uint8_t)tot;
		ip[4] = (uint8_t)(s->ip_id >> 8);
		ip[5] = (uint8_t)s->ip_id;
		s->ip_id++;
		ip[6] = 0x40;               /* DF, as Linux sends a datagram that fits */
		ip[7] = 0;
		ip[8] = 64;
		ip[9] = IPPROTO_UDP;
		ip[10] = ip[11] = 0;
		memcpy(ip + 12, src, 4);
		memcpy(ip + 16, dst, 4);
		sum = (uint16_t)~fold(sum16(0, ip, 20, &odd));
		ip[10] = (uint8_t)(sum >> 8);
		ip[11] = (uint8_t)sum;
	} else {
		ip[0] = 0x60;
		ip[1] = ip[2] = ip[3] = 0;
		ip[4] = (uint8_t)(ulen >> 8);
		ip[5] = (uint8_t)ulen;
		ip[6] = IPPROTO_UDP;
		ip[7] = 64;
		memcpy(ip + 8, src, 16);
		memcpy(ip + 24, dst, 16);
	}
	udp[0] = (uint8_t)(s->port >> 8);
	udp[1] = (uint8_t)s->port;
	udp[2] = (uint8_t)(dport >> 8);
	udp[3] = (uint8_t)dport;
	udp[4] = (uint8_t)(ulen >> 8);
	udp[5] = (uint8_t)ulen;
	udp[6] = udp[7] = 0;
	odd = 0;
	sum = pseudo_sum(family, src, dst, ulen);
	sum = (uint16_t)~fold(sum16(sum, udp, ulen, &odd));
	if (sum == 0)
		sum = 0xffff;
	udp[6] = (uint8_t)(sum >> 8);
	udp[7] = (uint8_t)sum;
	return hl + ulen;
}

/* Wait until s's transmit ring has room (or timeout_ms): 0 or -errno. */
static int
wait_tx(struct psock *s, const struct chan *c, int timeout_ms)
{
	struct pollfd p = { .fd = s->efd, .events = POLLIN };
	int ret;

	pthread_mutex_lock(&s->mu);
	ret = nc_channel_arm_tx(c->ch);
	pthread_mutex_unlock(&s->mu);
	if (ret < 0)
		return timeout_ms == 0 ? -EAGAIN : (REAL(poll)(NULL, 0, 1), 0);
	if (ret > 0)
		return 0;
	if (REAL(poll)(&p, 1, timeout_ms) < 0)
		return -errno;
	/* The wake-up may have been for a datagram: the eventfd's level is the receiver's. */
	return 0;
}

/* Send msg's datagram (to its name, or the peer): its length, or -errno. */
static ssize_t
send_msg(struct psock *s, const struct msghdr *msg, int flags)
{
	uint8_t dst[16], src[16];
	uint16_t dport;
	int family;
	size_t len = 0;
	const struct chan *c;
	ssize_t ret;

	for (size_t i = 0; i < msg->msg_iovlen; i++)
		len += msg->msg_iov[i].iov_len;
	if (msg->msg_name != NULL && msg->msg_namelen > 0) {
		uint8_t pa[16];
		uint16_t pp;

		if (((struct sockaddr *)msg->msg_name)->sa_family != s->family ||
		    msg->msg_namelen < (s->family == AF_INET ? sizeof(struct sockaddr_in) :
					sizeof(struct sockaddr_in6)))
			goto kernel;
		family = addr_of(msg->msg_name, dst, &dport);
		/* A connected socket's channel is its peer's: elsewhere is the kernel's way. */
		if (s->connected &&
		    (addr_of((struct sockaddr *)&s->peer, pa, &pp) != family || pp != dport ||
		     memcmp(pa, dst, (size_t)addr_len(family)) != 0))
			goto kernel;
	} else if (s->connected) {
		family = addr_of((struct sockaddr *)&s->peer, dst, &dport);
	} else {
		return -EDESTADDRREQ;
	}
	if (s->gone || len > 65507 || dport == 0)
		goto kernel;
	/* Loopback and the host's own addresses: the kernel's to carry. */
	if ((family == AF_INET && dst[0] == 127) ||
	    (family == AF_INET6 && IN6_IS_ADDR_LOOPBACK((struct in6_addr *)dst)) ||
	    chan_by_addr(s, family, dst) != NULL)
		goto kernel;
	c = NULL;
	if (src_from_cmsg(msg, family, src))
		c = chan_by_addr(s, family, src);
	else if (s->nch == 1 && s->ch[0].family == family)
		c = &s->ch[0];
	else if (src_for(s, family, dst, src) == 0)
		c = chan_by_addr(s, family, src);
	if (c == NULL)
		goto kernel;
	memcpy(src, c->addr, 16);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		size_t n = build(s, family, src, dst, dport, msg->msg_iov, msg->msg_iovlen, len);

		ret = s->gone ? -EPIPE : nc_send_ip(c->ch, txbuf, n);
		pthread_mutex_unlock(&s->mu);
		if (ret >= 0)
			return (ssize_t)len;
		if (ret == -EMSGSIZE)
			goto kernel;
		if (ret == -EPIPE || ret == -ESHUTDOWN) {
			went(s, (int)-ret);
			goto kernel;
		}
		if (ret != -EAGAIN)
			return ret;
		if (s->nonblock || (flags & MSG_DONTWAIT))
			return -EAGAIN;
		ret = wait_tx(s, c, 100);
		if (ret < 0 && ret != -EAGAIN)
			return ret;
	}
kernel:
	/* The kernel socket is bound to the same port: it sends as the socket would. */
	ret = REAL(sendmsg)(s->kfd, msg, flags | (s->nonblock ? MSG_DONTWAIT : 0));
	if (ret < 0)
		return -errno;
	s->kernel_tx++;
	return ret;
}

/* ---- The calls ---- */

static ssize_t
ret_errno(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

EXPORT int
socket(int domain, int type, int protocol)
{
	int fd;

	table_init();
	fd = REAL(socket)(domain, type, protocol);
	if (fd >= 0 && fd < tabn) {
		if (tab[fd] != NULL || passed[fd])
			forget(fd);
		if (making_ctlfd != NULL && domain == AF_UNIX)
			*making_ctlfd = fd;
		if (!((domain == AF_INET || domain == AF_INET6) &&
		      (type & 0xf) == SOCK_DGRAM && (protocol == 0 || protocol == IPPROTO_UDP)))
			passed[fd] = 1;
	}
	return fd;
}

EXPORT int
bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	int ret = REAL(bind)(fd, addr, len), err = errno;

	table_init();
	if (ret == 0 && fd >= 0 && fd < tabn && tab[fd] == NULL && !passed[fd]) {
		if (is_udp(fd))
			offload(fd);
		else
			passed[fd] = 1;
	}
	errno = err;
	return ret;
}

EXPORT int
connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct psock *s = get(fd);
	int ret, err;

	if (s == NULL) {
		ret = REAL(connect)(fd, addr, len);
		err = errno;
		table_init();
		if (ret == 0 && fd >= 0 && fd < tabn && !passed[fd]) {
			if (is_udp(fd))
				offload(fd);
			else
				passed[fd] = 1;
		}
		errno = err;
		return ret;
	}
	pthread_mutex_lock(&s->mu);
	ret = REAL(connect)(s->kfd, addr, len);
	err = errno;
	if (ret == 0 && !s->gone) {
		uint8_t a[16] = { 0 };
		socklen_t l = sizeof(s->peer);
		struct sockaddr_storage local;
		socklen_t ll = sizeof(local);
		uint16_t port;
		int family, r;
		struct chan old[MAX_CH];
		int nold = s->nch, was = s->connected;

		s->connected = REAL(getpeername)(s->kfd, (struct sockaddr *)&s->peer, &l) == 0;
		memcpy(old, s->ch, sizeof(old));
		s->nch = 0;
		if (!s->connected && s->nwide > 0) {
			/* Widened again (AF_UNSPEC): the channels it had before it was connected. */
			memcpy(s->ch, s->wide, sizeof(s->ch));
			s->nch = s->nwide;
			s->nwide = 0;
			r = 0;
		} else {
			REAL(getsockname)(s->kfd, (struct sockaddr *)&local, &ll);
			/* Connected, the kernel chose the local address: the channel is for it alone. */
			family = addr_of((struct sockaddr *)&local, a, &port);
			r = channels_make(s, family, a);
		}
		if (r == 0 && s->connected && !was) {
			/*
			 * Narrowed: the wide channels stay, a priority below the new one, so that
			 * nothing on its way to them when connect() returns is lost: what they
			 * bring from the peer is received, the rest dropped, as the kernel's
			 * connected socket does (frame_take()).
			 */
			memcpy(s->wide, old, sizeof(s->wide));
			s->nwide = nold;
		} else {
			/* Another peer's, or widened: the old channels' datagrams are not the socket's. */
			for (int i = 0; i < nold; i++)
				nc_channel_destroy(old[i].ch);
		}
		if (r != 0) {
			say("socket %d: no channel after connect: %s%s%s; the kernel carries on", fd,
			    nc_strerror(r), *nc_last_reason() ? ": " : "", nc_last_reason());
			channels_drop(s);
			s->gone = 1;
		} else {
			say("socket %d: port %u on %d channel(s)%s", fd, s->port, s->nch,
			    s->connected ? ", connected" : "");
			if (s->nheld == 0)
				rearm(s);
		}
	}
	pthread_mutex_unlock(&s->mu);
	errno = err;
	return ret;
}

EXPORT int
close(int fd)
{
	if (fd >= 0 && fd < tabn && (tab[fd] != NULL || passed[fd]))
		forget(fd);
	return REAL(close)(fd);
}

/* newfd is another name of oldfd's socket now (dup() and the like returned it). */
static int
alias(int oldfd, int newfd)
{
	struct psock *s = lookup(oldfd);

	if (newfd < 0 || newfd == oldfd)
		return newfd;
	forget(newfd);
	if (s != NULL && newfd < tabn) {
		pthread_mutex_lock(&tab_mu);
		s->refs++;
		tab[newfd] = s;
		pthread_mutex_unlock(&tab_mu);
	} else if (oldfd >= 0 && oldfd < tabn && passed[oldfd] && newfd < tabn) {
		passed[newfd] = 1;
	}
	return newfd;
}

EXPORT int
dup(int fd)
{
	return alias(fd, REAL(dup)(fd));
}

EXPORT int
dup2(int oldfd, int newfd)
{
	int ret, err;

	if (oldfd == newfd)
		return REAL(dup2)(oldfd, newfd);
	ret = REAL(dup2)(oldfd, newfd);
	err = errno;
	if (ret >= 0)
		alias(oldfd, ret);
	errno = err;
	return ret;
}

EXPORT int
dup3(int oldfd, int newfd, int flags)
{
	int ret = REAL(dup3)(oldfd, newfd, flags), err = errno;

	if (ret >= 0)
		alias(oldfd, ret);
	errno = err;
	return ret;
}

/* fcntl() of one of our sockets: the file status flags are the socket's, not the eventfd's. */
static int
fcntl_ours(struct psock *s, int fd, int cmd, long arg)
{
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (s->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		/* The kernel socket's too: a child of fork() may get it back (after_fork_child()). */
		s->nonblock = (arg & O_NONBLOCK) != 0;
		return REAL(fcntl)(s->kfd, F_SETFL, arg);
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return alias(fd, REAL(fcntl)(fd, cmd, arg));
	case F_GETFD:
	case F_SETFD:
		return REAL(fcntl)(fd, cmd, arg);
	default:
		return REAL(fcntl)(s->kfd, cmd, arg);
	}
}

static int
fcntl_any(int fd, int cmd, va_list ap, int (*real)(int, int, ...))
{
	struct psock *s = get(fd);
	long arg = va_arg(ap, long);
	int ret, err;

	if (s != NULL)
		return fcntl_ours(s, fd, cmd, arg);
	ret = real(fd, cmd, arg);
	err = errno;
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && ret >= 0)
		alias(fd, ret);
	errno = err;
	return ret;
}

EXPORT int
fcntl(int fd, int cmd, ...)
{
	va_list ap;
	int ret;

	va_start(ap, cmd);
	ret = fcntl_any(fd, cmd, ap, REAL(fcntl));
	va_end(ap);
	return ret;
}

static int (*r_fcntl64)(int, int, ...);

EXPORT int
fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	int ret;

	va_start(ap, cmd);
	ret = fcntl_any(fd, cmd, ap, REAL(fcntl64) != NULL ? REAL(fcntl64) : REAL(fcntl));
	va_end(ap);
	return ret;
}

EXPORT int
ioctl(int fd, unsigned long req, ...)
{
	struct psock *s = get(fd);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (s == NULL)
		return REAL(ioctl)(fd, req, arg);
	/* The application's int may be anywhere (Python's ioctl buffers are not aligned). */
	if (req == FIONBIO) {
		int on;

		memcpy(&on, arg, sizeof(on));
		s->nonblock = on != 0;
		return REAL(ioctl)(s->kfd, req, arg);
	}
	if (req == FIONREAD) {
		struct dgram g;
		int n = 0;

		pthread_mutex_lock(&s->mu);
		if (!s->gone && frame_take(s, &g))
			n = (int)g.len;
		pthread_mutex_unlock(&s->mu);
		if (n == 0 || s->gone)
			return REAL(ioctl)(s->kfd, req, arg);
		memcpy(arg, &n, sizeof(n));
		return 0;
	}
	return REAL(ioctl)(s->kfd, req, arg);
}

EXPORT ssize_t
recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct psock *s = get(fd);

	if (s == NULL)
		return REAL(recvmsg)(fd, msg, flags);
	return recv_msg(s, msg, flags);
}

EXPORT ssize_t
recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	struct psock *s = get(fd);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (s == NULL)
		return REAL(recvfrom)(fd, buf, len, flags, from, fromlen);
	if (from != NULL && fromlen != NULL) {
		m.msg_name = from;
		m.msg_namelen = *fromlen;
	}
	n = recv_msg(s, &m, flags);
	if (n >= 0 && from != NULL && fromlen != NULL)
		*fromlen = m.msg_namelen;
	return n;
}

EXPORT ssize_t
__recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *from,
	       socklen_t *fromlen)
{
	if (len > buflen)
		abort();
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

EXPORT ssize_t
recv(int fd, void *buf, size_t len, int flags)
{
	if (get(fd) == NULL)
		return REAL(recv)(fd, buf, len, flags);
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

EXPORT ssize_t
__recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		abort();
	return recv(fd, buf, len, flags);
}

EXPORT ssize_t
read(int fd, void *buf, size_t len)
{
	if (get(fd) == NULL)
		return REAL(read)(fd, buf, len);
	return recvfrom(fd, buf, len, 0, NULL, NULL);
}

EXPORT ssize_t
__read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		abort();
	return read(fd, buf, len);
}

EXPORT ssize_t
readv(int fd, const struct iovec *iov, int n)
{
	struct psock *s = get(fd);
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };

	if (s == NULL)
		return REAL(readv)(fd, iov, n);
	return recv_msg(s, &m, 0);
}

EXPORT int
recvmmsg(int fd, struct mmsghdr *v, unsigned int vlen, int flags, struct timespec *timeout)
{
	struct psock *s = get(fd);
	unsigned int i;

	if (s == NULL)
		return REAL(recvmmsg)(fd, v, vlen, flags, timeout);
	for (i = 0; i < vlen; i++) {
		/* The first as flags say; after MSG_WAITFORONE's first, none waits. */
		int f = flags & ~MSG_WAITFORONE;
		ssize_t n;

		if (i > 0 && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		n = recv_msg(s, &v[i].msg_hdr, f);
		if (n < 0) {
			if (i > 0)
				break;
			return -1;
		}
		v[i].msg_len = (unsigned int)n;
	}
	return (int)i;
}

static void implicit_bind(int fd);

EXPORT ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct psock *s = get(fd);

	if (s == NULL && fd >= 0 && fd < tabn && !passed[fd] && msg->msg_name != NULL) {
		implicit_bind(fd);
		s = get(fd);
	}
	if (s == NULL)
		return REAL(sendmsg)(fd, msg, flags);
	return ret_errno(send_msg(s, msg, flags));
}

/* An unbound UDP socket that sends is bound by the kernel: on channels then too. */
static void
implicit_bind(int fd)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof(a);
	uint8_t addr[16];
	uint16_t port = 0;

	table_init();
	if (fd < 0 || fd >= tabn || passed[fd] || tab[fd] != NULL)
		return;
	if (!is_udp(fd) || REAL(getsockname)(fd, (struct sockaddr *)&a, &l) != 0) {
		passed[fd] = 1;
		return;
	}
	addr_of((struct sockaddr *)&a, addr, &port);
	if (port == 0) {
		/* Bound to an ephemeral port as the kernel would at the first send. */
		a.ss_family == AF_INET ? (((struct sockaddr_in *)&a)->sin_port = 0)
				       : (((struct sockaddr_in6 *)&a)->sin6_port = 0);
		if (REAL(bind)(fd, (struct sockaddr *)&a, l) != 0) {
			passed[fd] = 1;
			return;
		}
	}
	if (offload(fd) != 0)
		passed[fd] = 1;
}

EXPORT ssize_t
sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to, socklen_t tolen)
{
	struct psock *s = get(fd);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov,
			    .msg_iovlen = 1 };

	if (s == NULL && fd >= 0 && fd < tabn && !passed[fd] && to != NULL) {
		implicit_bind(fd);
		s = get(fd);
	}
	if (s == NULL)
		return REAL(sendto)(fd, buf, len, flags, to, tolen);
	return ret_errno(send_msg(s, &m, flags));
}

EXPORT ssize_t
send(int fd, const void *buf, size_t len, int flags)
{
	struct psock *s = get(fd);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (s == NULL)
		return REAL(send)(fd, buf, len, flags);
	return ret_errno(send_msg(s, &m, flags));
}

EXPORT ssize_t
write(int fd, const void *buf, size_t len)
{
	struct psock *s = get(fd);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (s == NULL)
		return REAL(write)(fd, buf, len);
	return ret_errno(send_msg(s, &m, 0));
}

EXPORT ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	struct psock *s = get(fd);
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };

	if (s == NULL)
		return REAL(writev)(fd, iov, n);
	return ret_errno(send_msg(s, &m, 0));
}

EXPORT int
sendmmsg(int fd, struct mmsghdr *v, unsigned int vlen, int flags)
{
	struct psock *s = get(fd);
	unsigned int i;

	if (s == NULL)
		return REAL(sendmmsg)(fd, v, vlen, flags);
	for (i = 0; i < vlen; i++) {
		ssize_t n = send_msg(s, &v[i].msg_hdr, flags);

		if (n < 0) {
			if (i > 0)
				break;
			errno = (int)-n;
			return -1;
		}
		v[i].msg_len = (unsigned int)n;
	}
	return (int)i;
}

EXPORT int
getsockname(int fd, struct sockaddr *a, socklen_t *l)
{
	struct psock *s = get(fd);

	return REAL(getsockname)(s != NULL ? s->kfd : fd, a, l);
}

EXPORT int
getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
	struct psock *s = get(fd);

	return REAL(getpeername)(s != NULL ? s->kfd : fd, a, l);
}

EXPORT int
getsockopt(int fd, int level, int name, void *v, socklen_t *l)
{
	struct psock *s = get(fd);

	return REAL(getsockopt)(s != NULL ? s->kfd : fd, level, name, v, l);
}

EXPORT int
setsockopt(int fd, int level, int name, const void *v, socklen_t l)
{
	struct psock *s = get(fd);
	int ret;

	if (s == NULL)
		return REAL(setsockopt)(fd, level, name, v, l);
	ret = REAL(setsockopt)(s->kfd, level, name, v, l);
	if (ret == 0)
		options_read(s, s->kfd);
	/* The kernel socket's own O_NONBLOCK is ours; the application's is s->nonblock. */
	return ret;
}

EXPORT int
shutdown(int fd, int how)
{
	struct psock *s = get(fd);

	return REAL(shutdown)(s != NULL ? s->kfd : fd, how);
}

/* ---- Readiness ---- */

/*
 * poll() and ppoll(): each of our sockets also polls its kernel socket, for
 * what still comes to it; its readiness is the socket's.
 */
static int
poll_any(struct pollfd *fds, nfds_t n, int timeout_ms, const struct timespec *ts,
	 const sigset_t *mask, int use_ppoll)
{
	struct pollfd stack[64], *all = stack;
	nfds_t extra = 0, k;
	int ret;

	for (k = 0; k < n; k++)
		if (get(fds[k].fd) != NULL)
			extra++;
	if (extra == 0)
		return use_ppoll ? REAL(ppoll)(fds, n, ts, mask) : REAL(poll)(fds, n, timeout_ms);
	if (n + extra > 64) {
		all = malloc((n + extra) * sizeof(*all));
		if (all == NULL) {
			errno = ENOMEM;
			return -1;
		}
	}
	memcpy(all, fds, n * sizeof(*fds));
	extra = n;
	for (k = 0; k < n; k++) {
		struct psock *s = lookup(fds[k].fd);

		if (s != NULL)
			all[extra++] = (struct pollfd){ .fd = s->kfd,
							.events = fds[k].events & (POLLIN | POLLPRI) };
	}
	ret = use_ppoll ? REAL(ppoll)(all, extra, ts, mask) : REAL(poll)(all, extra, timeout_ms);
	if (ret > 0) {
		nfds_t e = n;

		ret = 0;
		for (k = 0; k < n; k++) {
			fds[k].revents = all[k].revents;
			if (lookup(fds[k].fd) != NULL) {
				/* The eventfd is always writable, never in error: the kernel socket says. */
				fds[k].revents |= all[e].revents & (POLLIN | POLLPRI | POLLERR);
				e++;
			}
			if (fds[k].revents)
				ret++;
		}
	} else {
		for (k = 0; k < n; k++)
			fds[k].revents = all[k].revents;
	}
	if (all != stack)
		free(all);
	return ret;
}

EXPORT int
poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
	return poll_any(fds, n, timeout_ms, NULL, NULL, 0);
}

EXPORT int
__poll_chk(struct pollfd *fds, nfds_t n, int timeout_ms, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();
	return poll(fds, n, timeout_ms);
}

EXPORT int
ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	return poll_any(fds, n, -1, ts, mask, 1);
}

EXPORT int
__ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask,
	    size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();
	return ppoll(fds, n, ts, mask);
}

/* select() and pselect() with one of our sockets among their sets: by poll_any(). */
static int
select_any(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts,
	   const sigset_t *mask, int *done)
{
	struct pollfd stack[128], *p = stack;
	int n = 0, ret, ours = 0;

	*done = 0;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++)
		if (get(fd) != NULL &&
		    ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (x && FD_ISSET(fd, x))))
			ours = 1;
	if (!ours)
		return 0;
	*done = 1;
	if (nfds > 128) {
		p = malloc((size_t)nfds * sizeof(*p));
		if (p == NULL) {
			errno = ENOMEM;
			return -1;
		}
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((r && FD_ISSET(fd, r) ? POLLIN : 0) |
				   (w && FD_ISSET(fd, w) ? POLLOUT : 0) |
				   (x && FD_ISSET(fd, x) ? POLLPRI : 0));

		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	ret = poll_any(p, (nfds_t)n, -1, ts, mask, 1);
	if (ret >= 0) {
		ret = 0;
		if (r)
			FD_ZERO(r);
		if (w)
			FD_ZERO(w);
		if (x)
			FD_ZERO(x);
		for (int i = 0; i < n; i++) {
			short re = p[i].revents;

			if (re & POLLNVAL) {
				errno = EBADF;
				ret = -1;
				break;
			}
			if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(p[i].fd, r);
				ret++;
			}
			if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
				FD_SET(p[i].fd, w);
				ret++;
			}
			if (x && (p[i].events & POLLPRI) && (re & POLLPRI)) {
				FD_SET(p[i].fd, x);
				ret++;
			}
		}
	}
	if (p != stack)
		free(p);
	return ret;
}

static int (*r_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static int (*r_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
			const sigset_t *);

EXPORT int
select(int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv)
{
	struct timespec ts, *tsp = NULL;
	int done, ret;

	if (tv != NULL) {
		ts.tv_sec = tv->tv_sec;
		ts.tv_nsec = tv->tv_usec * 1000;
		tsp = &ts;
	}
	ret = select_any(nfds, r, w, x, tsp, NULL, &done);
	if (!done)
		return REAL(select)(nfds, r, w, x, tv);
	return ret;
}

EXPORT int
pselect(int nfds, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts,
	const sigset_t *mask)
{
	int done, ret = select_any(nfds, r, w, x, ts, mask, &done);

	if (!done)
		return REAL(pselect)(nfds, r, w, x, ts, mask);
	return ret;
}

/* epoll: the kernel socket joins the set beside the eventfd, with the application's data. */
EXPORT int
epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct psock *s = get(fd);
	int ret = REAL(epoll_ctl)(epfd, op, fd, ev), err = errno;

	if (s != NULL && ret == 0) {
		struct epoll_event k = { 0 };

		if (ev != NULL) {
			k = *ev;
			k.events &= EPOLLIN | EPOLLPRI | EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE;
		}
		if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) {
			if (REAL(epoll_ctl)(epfd, op, s->kfd, &k) != 0 && op == EPOLL_CTL_MOD)
				REAL(epoll_ctl)(epfd, EPOLL_CTL_ADD, s->kfd, &k);
		} else if (op == EPOLL_CTL_DEL) {
			REAL(epoll_ctl)(epfd, EPOLL_CTL_DEL, s->kfd, NULL);
		}
	}
	errno = err;
	return ret;
}
