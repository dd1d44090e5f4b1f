/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Isolated clients for the tests: an honest one, and a hostile one that
 * speaks the protocol itself so that it keeps its region's memfd.
 *
 *   nc_iso_client SOCK honest PORT SECONDS   receive with nc_rx_bufs, then print the counts
 *   nc_iso_client SOCK copy PORT COUNT       receive COUNT by nc_recv (blocking), nc_send each back
 *   nc_iso_client SOCK attach NAME COUNT     attach to a static channel, receive COUNT, hold it
 *                                            until a line on stdin (or its end)
 *   nc_iso_client SOCK frames PORT HEX...    claim udp/PORT (any destination), send each frame,
 *                                            print the outcomes, hold until stdin closes
 *   nc_iso_client SOCK raw-frames PORT HEX... the same, each frame put on the tx ring as it is
 *   nc_iso_client SOCK follow NAME WORD      attach, receive until the channel is gone (ESTALE),
 *                                            every packet carrying WORD
 *   nc_iso_client SOCK hostile PORT SECRET   look for SECRET, attack the region until killed
 *   nc_iso_client SOCK hostile-one-ring PORT SECRET   the same with one ring for all
 *   nc_iso_client SOCK hostile-go PORT SECRET   hostile, once a line comes on stdin
 *   nc_iso_client SOCK returns PORT          take every buffer, give back a fixed mix of good
 *                                            and bad returns, hold until stdin closes
 *   nc_iso_client SOCK onering BASE N        one ring for all: N channels, see one_ring()
 *   nc_iso_client SOCK rings BASE N          a ring each: create N channels, say where it stops
 *   nc_iso_client SOCK churn BASE SECONDS    firewall-shaped channels replaced without pause,
 *                                            every packet checked against the rules in force
 */
#define _GNU_SOURCE /* memmem, F_ADD_SEALS */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nc_proto.h"
#include "netchannel.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct nc_channel *
claim(struct nc_client *c, const char *name, long port)
{
	struct nc_channel_opts o = NC_SIZED(nc_channel_opts, .tx = 1);
	struct nc_rule r = NC_SIZED(nc_rule);
	struct nc_channel *ch;

	nc_rule_flow(&r, "udp", NULL, port);
	ch = nc_channel_create(c, name, &r, &o);
	if (ch == NULL) {
		printf("create: %s\n", nc_strerror(errno));
		nc_disconnect(c);
		exit(2);
	}
	return ch;
}

static int
honest(const char *sock, long port, double seconds)
{
	struct nc_client *c = nc_connect(sock, 0);
	struct nc_channel_stats st = NC_SIZED(nc_channel_stats);
	struct nc_channel *ch;
	uint64_t got = 0;
	double end;

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	ch = claim(c, "honest", port);
	printf("ready\n");
	fflush(stdout);
	end = now_s() + seconds;
	while (now_s() < end) {
		struct nc_buf b[32];
		uint16_t n = nc_rx_bufs(ch, b, 32);

		got += n;
		if (n > 0 && nc_bufs_release(c, b, n) != n) {
			printf("release: fewer than received\n");
			return 1;
		}
	}
	/* What the daemon counted; what it delivered since is at most a ring and a burst. */
	if (nc_channel_stats(ch, &st) != 0)
		return 1;
	printf("received %" PRIu64 " hits %" PRIu64 " delivered %" PRIu64 " ring_full %" PRIu64
	       " no_buf %" PRIu64 "\n", got, st.hits, st.delivered, st.drop_ring_full, st.drop_no_buf);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return 0;
}

static void
swap(uint8_t *a, uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t t = a[i];

		a[i] = b[i];
		b[i] = t;
	}
}

static int
copy_echo(const char *sock, long port, long count)
{
	struct nc_client *c = nc_connect(sock, 0);
	struct nc_channel *ch;
	uint8_t f[2048];
	long done = 0;

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	ch = claim(c, "copy", port);
	printf("ready\n");
	fflush(stdout);
	while (done < count) {
		ssize_t n = nc_recv(ch, f, sizeof(f), 10000);
		ssize_t s;

		if (n < 0) {
			printf("recv: %s\n", nc_strerror((int)n));
			return 1;
		}
		/* Turned round: the test's frames are untagged IPv4 without options, UDP. */
		if (n < 42) {
			printf("recv: %zd bytes, not a test frame\n", n);
			return 1;
		}
		swap(f, f + 6, 6);
		swap(f + 26, f + 30, 4);
		swap(f + 34, f + 36, 2);
		s = nc_send(ch, f, (size_t)n);
		if (s != n) {
			printf("send: %s\n", nc_strerror((int)s));
			return 1;
		}
		done++;
	}
	printf("echoed %ld\n", done);
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return 0;
}

/* Attach to a static channel, receive count of its packets in place, hold it until told, let go. */
static int
attach(const char *sock, const char *name, long count)
{
	struct nc_client *c = nc_connect(sock, 0);
	struct nc_channel *ch;
	long got = 0;

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	ch = nc_channel_attach(c, name);
	if (ch == NULL) {
		printf("attach: %s\n", nc_strerror(errno));
		nc_disconnect(c);
		return 2;
	}
	printf("attached\n");
	while (got < count) {
		struct nc_buf b[32];
		uint16_t n = nc_rx_bufs(ch, b, count - got < 32 ? (uint16_t)(count - got) : 32);

		if (n == 0 && errno == EPIPE)
			return 1;
		got += n;
		nc_bufs_release(c, b, n);
	}
	printf("received %ld\n", got);
	fflush(stdout);
	/* Held while the test tries another attach: until a line on stdin, or its end. */
	for (int k = getchar(); k != EOF && k != '\n'; k = getchar())
		;
	printf("detach %d\n", nc_channel_destroy(ch));
	nc_disconnect(c);
	return 0;
}

/*
 * Attach to a static channel and receive by copy, sleeping, until the
 * channel is gone (ESTALE): every packet must carry word, the channel's own
 * mark, however the channel's id and ring are reused meanwhile.
 */
static int
follow(const char *sock, const char *name, const char *word)
{
	struct nc_client *c = nc_connect(sock, 0);
	struct nc_channel *ch;
	long good = 0, wrong = 0;
	double end = now_s() + 20;

	if (c == NULL || (ch = nc_channel_attach(c, name)) == NULL) {
		printf("attach: %s\n", nc_strerror(errno));
		return 2;
	}
	printf("attached\n");
	fflush(stdout);
	while (now_s() < end) {
		static char f[2048];
		ssize_t n = nc_recv(ch, f, sizeof(f), 500);

		if (n == -EAGAIN)
			continue;
		if (n < 0) {
			printf("%s after %ld good %ld wrong\n", n == -ESTALE ? "stale" : nc_strerror((int)n),
			       good, wrong);
			printf("destroy %d\n", nc_channel_destroy(ch));
			nc_disconnect(c);
			return n == -ESTALE ? 0 : 1;
		}
		if (memmem(f, (size_t)n, word, strlen(word)) != NULL)
			good++;
		else
			wrong++;
		if (good == 10) {
			printf("receiving\n");
			fflush(stdout);
		}
	}
	printf("timeout after %ld good %ld wrong\n", good, wrong);
	return 1;
}

/*
 * Claim udp/port with no destination and transmit each frame given in hex:
 * the daemon lets out only those from the port's MAC and one of the host's
 * addresses. Prints the outcomes, and keeps the channel until stdin closes.
 */
/* A frame written in hex, into f (size bytes at most). @return its length */
static size_t
unhex(const char *hex, uint8_t *f, size_t size)
{
	size_t len = strlen(hex) / 2;

	if (len > size)
		len = size;
	for (size_t k = 0; k < len; k++)
		sscanf(hex + 2 * k, "%2hhx", &f[k]);
	return len;
}

static int
send_frames(const char *sock, long port, int n, char **hex)
{
	struct nc_client *c = nc_connect(sock, 0);
	struct nc_channel_stats st = NC_SIZED(nc_channel_stats);
	struct nc_channel *ch;
	int sent = 0;

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	ch = claim(c, "frames", port);
	printf("results");
	for (int i = 0; i < n; i++) {
		uint8_t f[2048];
		size_t len = unhex(hex[i], f, sizeof(f));
		ssize_t r = nc_send(ch, f, len);

		printf(" %zd", r);
		sent += r > 0;
	}
	printf("\n");
	/* Until the daemon has an outcome for each (2 s at most). */
	for (int i = 0; i < 200 && nc_channel_stats(ch, &st) == 0 &&
	     st.tx + st.tx_spoofed + st.tx_malformed + st.tx_dropped < (uint64_t)sent; i++)
		usleep(10000);
	printf("sent %d tx %" PRIu64 " spoofed %" PRIu64 "\n", sent, st.tx, st.tx_spoofed);
	fflush(stdout);
	while (getchar() != EOF)
		;
	nc_channel_destroy(ch);
	nc_disconnect(c);
	return 0;
}

/* The raw protocol: one request, one reply, and the fd it may carry. */
/* One request; the reply's first nfd file descriptors go to fd[] (left alone if it has none). */
static int
call_fds(int s, uint16_t type, const void *body, uint32_t len, void *out, size_t out_len,
	 int *fd, unsigned int nfd)
{
	static uint32_t id;
	uint8_t msg[NC_CTL_MAX_MSG];
	struct nc_ctl_req req = { .magic = NC_CTL_MAGIC, .type = type, .id = ++id, .len = len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	struct iovec iov = { msg, sizeof(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct nc_ctl_rep rep;
	struct cmsghdr *h;
	ssize_t n;

	memcpy(msg, &req, sizeof(req));
	memcpy(msg + sizeof(req), body, len);
	if (send(s, msg, sizeof(req) + len, 0) < 0)
		return -errno;
	n = recvmsg(s, &mh, 0);
	if (n < (ssize_t)sizeof(rep))
		return -EBADMSG;
	memcpy(&rep, msg, sizeof(rep));
	for (h = CMSG_FIRSTHDR(&mh); fd != NULL && h != NULL; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_type == SCM_RIGHTS) {
			size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			memcpy(fd, CMSG_DATA(h), (k < nfd ? k : nfd) * sizeof(int));
		}
	if (rep.status == 0 && out != NULL)
		memcpy(out, msg + sizeof(rep), out_len < rep.len ? out_len : rep.len);
	return rep.status;
}

static int
call(int s, uint16_t type, const void *body, uint32_t len, void *out, size_t out_len, int *fd)
{
	return call_fds(s, type, body, len, out, out_len, fd, 1);
}

/* Files of the daemon's memory this user could open: its hugepage files and runtime dir. */
static unsigned int
daemon_files_opened(void)
{
	const char *dirs[] = { "/dev/hugepages", "/var/run/dpdk" };
	unsigned int opened = 0;

	for (unsigned int i = 0; i < 2; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;

		while (d != NULL && (e = readdir(d)) != NULL) {
			char path[512];
			int fd;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dirs[i], e->d_name);
			fd = open(path, O_RDONLY);
			if (fd >= 0) {
				struct stat st;

				/* A directory lets it in only if it may read a file inside. */
				if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
					opened++;
				close(fd);
			}
		}
		if (d != NULL)
			closedir(d);
	}
	return opened;
}

static uint32_t
rnd(void)
{
	return (uint32_t)random() ^ ((uint32_t)random() << 16);
}

/* A connection that speaks the protocol itself, keeping its region's memfds. */
struct raw {
	int s, fd, cfd;                /* the daemon's part (read-only), the client's */
	uint8_t *base, *cbase;
	uint64_t csize;
	struct nc_ctl_hello_reply hr;
	struct nc_ctl_channel info;
	struct nc_region_hdr h;
	struct nc_region_ring *rx, *tx, *fr;
	struct nc_region_cons *rxc;    /* the rx ring's consumer line */
};

/* Connect, map the region and claim udp/port with a channel that may send; 0 or 2. */
static int
raw_open(const char *sock, long port, uint32_t flags, const char *name, struct raw *r)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct nc_ctl_hello hello = { .version = NC_CONTROL_PROTOCOL_VERSION, .pid = (uint32_t)getpid(),
				      .flags = flags };
	struct nc_ctl_create cr;
	int ret;

	int fds[2] = { -1, -1 };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	r->s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (connect(r->s, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    call_fds(r->s, NC_CTL_HELLO, &hello, sizeof(hello), &r->hr, sizeof(r->hr), fds, 2) != 0 ||
	    fds[0] < 0 || fds[1] < 0) {
		printf("hello failed\n");
		return 2;
	}
	r->fd = fds[0];
	r->cfd = fds[1];
	r->base = mmap(NULL, r->hr.region_size, PROT_READ, MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED) {
		printf("mmap: %s\n", strerror(errno));
		return 2;
	}
	memcpy(&r->h, r->base, sizeof(r->h));
	r->csize = r->h.client_size;
	r->cbase = mmap(NULL, r->csize, PROT_READ | PROT_WRITE, MAP_SHARED, r->cfd, 0);
	if (r->cbase == MAP_FAILED) {
		printf("mmap of the client's part: %s\n", strerror(errno));
		return 2;
	}
	memset(&cr, 0, sizeof(cr));
	snprintf(cr.name, sizeof(cr.name), "%s", name);
	cr.rule = (struct nc_ctl_rule){ .proto = 17, .proto_mask = 0xff, .dport_kind = 1,
					.dport_lo = (uint16_t)port, .dport_hi = (uint16_t)port };
	cr.flags = NC_CREATE_F_TX;
	ret = call(r->s, NC_CTL_CHANNEL_CREATE, &cr, sizeof(cr), &r->info, sizeof(r->info), NULL);
	if (ret != 0 || !(r->info.flags & NC_CHANNEL_F_REGION)) {
		printf("create: %d\n", ret);
		return 2;
	}
	r->rx = (struct nc_region_ring *)(r->base + r->h.rx_off + r->info.region_ring * r->h.rx_stride);
	r->rxc = (struct nc_region_cons *)(r->cbase + r->h.rx_cons_off) + r->info.region_ring;
	r->tx = (struct nc_region_ring *)(r->cbase + r->h.tx_off);
	r->fr = (struct nc_region_ring *)(r->cbase + r->h.free_off);
	return 0;
}

static const char *
outcome(int ret)
{
	return ret == 0 ? "allowed" : "refused";
}

/*
 * Everything a client may try on the region's descriptors: on the daemon's
 * part, to write it, map it writable, punch a hole in it (with the hugepage
 * pool empty, a hugetlb page freed under the daemon's mapping faults it),
 * resize it or seal it; on its own part, to resize or seal it, and to punch
 * a hole (allowed: the daemon reads zeros there, never a fault).
 */
static void
fd_attacks(struct raw *r)
{
	uint8_t byte = 0;
	void *w = mmap(NULL, r->hr.region_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);

	if (w != MAP_FAILED)
		munmap(w, r->hr.region_size);
	printf("fds daemon-part write %s map-writable %s mprotect %s punch %s shrink %s grow %s "
	       "seal %s",
	       outcome(pwrite(r->fd, &byte, 1, NC_REGION_HDR_SIZE) == 1 ? 0 : -1),
	       outcome(w != MAP_FAILED ? 0 : -1),
	       outcome(mprotect(r->base, 4096, PROT_READ | PROT_WRITE)),
	       outcome(fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
				 (off_t)r->hr.region_size)),
	       outcome(ftruncate(r->fd, 0)), outcome(ftruncate(r->fd, (off_t)r->hr.region_size * 2)),
	       outcome(fcntl(r->fd, F_ADD_SEALS, F_SEAL_WRITE)));
	printf(" client-part shrink %s grow %s seal %s punch %s\n",
	       outcome(ftruncate(r->cfd, 0)), outcome(ftruncate(r->cfd, (off_t)r->csize * 2)),
	       outcome(fcntl(r->cfd, F_ADD_SEALS, F_SEAL_WRITE)),
	       outcome(fallocate(r->cfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
				 (off_t)r->csize)));
	fflush(stdout);
}

/* Occurrences of secret in [p, end). */
static size_t
count_secret(const uint8_t *p, const uint8_t *end, const char *secret)
{
	size_t found = 0;

	while (p != NULL && p < end) {
		p = memmem(p, (size_t)(end - p), secret, strlen(secret));
		if (p != NULL) {
			found++;
			p++;
		}
	}
	return found;
}

/*
 * With go_line, wait for a line on stdin before the attacks (the test empties
 * the hugepage pool meanwhile).
 */
static int
hostile(const char *sock, long port, const char *secret, uint32_t flags, bool go_line)
{
	struct nc_region_ring *rx, *tx, *fr;
	struct nc_region_cons *rxc;
	size_t found;
	struct raw r;

	if (raw_open(sock, port, flags, "hostile", &r) != 0)
		return 2;
	rx = r.rx;
	rxc = r.rxc;
	tx = r.tx;
	fr = r.fr;
	if (go_line) {
		printf("connected\n");
		fflush(stdout);
		if (getchar() == EOF)
			return 2;
	}
	fd_attacks(&r);
	/*
	 * Let traffic flow and take what comes, without giving it back, until it
	 * holds every buffer (the daemon then reads its free ring); then look
	 * everywhere.
	 */
	for (int i = 0; i < 6; i++) {
		usleep(200 * 1000);
		__atomic_store_n(&rxc->tail, __atomic_load_n(&rx->head, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	}
	usleep(200 * 1000);
	found = count_secret(r.base, r.base + r.hr.region_size, secret) +
		count_secret(r.cbase, r.cbase + r.csize, secret);
	printf("secret found %zu daemon files opened %u\n", found, daemon_files_opened());
	printf("attacking\n");
	fflush(stdout);
	srandom((unsigned int)getpid());
	/*
	 * The daemon's tail of the tx ring, as last seen moving forward: a hole
	 * punched in the ring's line reads back 0, and the daemon writes its tail
	 * again only once it takes an entry, so a client that believed the 0
	 * would put every descriptor where the daemon never looks.
	 */
	uint32_t tx_tail = 0;

	for (uint64_t i = 0;; i++) {
		/*
		 * On the test bed (go_line), a fifth of a core: a spinning attacker
		 * on a two-core host takes the worker's core, and ping would time out
		 * for want of CPU, not because of anything the daemon did.
		 */
		if (go_line && i % 256 == 0)
			usleep(100);
		/* Mostly from where the daemon is, so that what follows is looked at at all. */
		uint32_t k = rnd() % 8, th = __atomic_load_n(&tx->cons.tail, __ATOMIC_ACQUIRE);

		if ((int32_t)(th - tx_tail) > 0)
			tx_tail = th;
		th = tx_tail;
		struct nc_desc dsc = { rnd(), rnd() % 4096, rnd() % 4, rnd() % 4 };

		switch (k) {
		case 0: /* a descriptor anywhere, of any length, for any channel */
			if (rnd() % 2)
				dsc.channel = r.info.id + rnd() % 3 - 1;
			tx->desc[th % r.h.tx_size] = dsc;
			__atomic_store_n(&tx->head, th + 1, __ATOMIC_RELEASE);
			break;
		case 1: /* the producer index pushed far ahead, or back */
			__atomic_store_n(&tx->head, rnd(), __ATOMIC_RELEASE);
			break;
		case 2: { /* buffers given back that are not ours, or twice */
			uint32_t fh = __atomic_load_n(&fr->cons.tail, __ATOMIC_ACQUIRE);
			uint32_t off = rnd() % 2 ? rx->desc[rnd() % r.h.rx_size].offset : rnd();

			fr->desc[fh % r.h.free_size].offset = off;
			fr->desc[(fh + 1) % r.h.free_size].offset = off;
			__atomic_store_n(&fr->head, fh + 2, __ATOMIC_RELEASE);
			break;
		}
		case 3: /* the consumer index of our rx ring moved by hand, past the producer */
			__atomic_store_n(&rxc->tail, rnd(), __ATOMIC_RELEASE);
			break;
		case 4: { /* a hole punched in its own part, under the daemon's reads */
			/*
			 * Mostly in the tx buffers, now and then anywhere (rings and
			 * indexes too): zeroed indexes all the time would leave the
			 * daemon nothing else to look at.
			 */
			uint64_t from = rnd() % 16 ? r.h.tx_buf_off : 0;
			off_t at = (off_t)(from + rnd() % (r.csize - from)) & ~(off_t)4095;

			fallocate(r.cfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at,
				  (off_t)(rnd() % 4 + 1) * 4096);
			break;
		}
		case 5: /* the free ring's index wild */
			__atomic_store_n(&fr->head, rnd(), __ATOMIC_RELEASE);
			break;
		case 6: /* a descriptor in the tx buffer area, well formed but spoofed */
			dsc.offset = (uint32_t)(r.h.tx_buf_off + (rnd() % r.h.tx_size) * r.h.buf_size);
			dsc.length = 60;
			dsc.channel = r.info.id;
			dsc.flags = 0;
			tx->desc[th % r.h.tx_size] = dsc;
			__atomic_store_n(&tx->head, th + 1, __ATOMIC_RELEASE);
			break;
		default: /* the tx buffers scribbled on, a page at a time */
			memset(r.cbase + ((r.h.tx_buf_off + rnd() % (r.csize - r.h.tx_buf_off)) &
					  ~(uint64_t)4095), rnd() & 0xff, 4096);
			break;
		}
	}
	return 0;
}

/*
 * Take every buffer the daemon gives (traffic to udp/port without pause),
 * then give back, in one go: one buffer off by a byte, the place just past
 * the rx buffers, one buffer twice, the region's header, and one
 * more buffer: two good returns and four bad. Hold until stdin closes.
 */
static int
returns(const char *sock, long port)
{
	uint32_t n = 0, tail = 0, head, fh, *off, give[6];
	double deadline = now_s() + 10;
	struct raw r;

	if (raw_open(sock, port, 0, "returns", &r) != 0)
		return 2;
	off = calloc(r.h.rx_bufs, sizeof(*off));
	while (off != NULL && n < r.h.rx_bufs && now_s() < deadline) {
		head = __atomic_load_n(&r.rx->head, __ATOMIC_ACQUIRE);
		for (; tail != head && n < r.h.rx_bufs; tail++)
			off[n++] = r.rx->desc[tail % r.h.rx_size].offset;
		__atomic_store_n(&r.rxc->tail, tail, __ATOMIC_RELEASE);
		usleep(1000);
	}
	printf("held %u of %u\n", n, r.h.rx_bufs);
	if (n < 3) {
		free(off);
		return 1;
	}
	give[0] = off[0] + 1;                  /* inside a held buffer, not its start */
	give[1] = (uint32_t)(r.h.buf_off + (uint64_t)r.h.rx_bufs * r.h.buf_size); /* just past them */
	give[2] = give[3] = off[1];            /* a held buffer, twice */
	give[4] = 0;                           /* the region's header */
	give[5] = off[2];
	fh = __atomic_load_n(&r.fr->head, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < 6; i++)
		r.fr->desc[(fh + i) % r.h.free_size].offset = give[i];
	__atomic_store_n(&r.fr->head, fh + 6, __ATOMIC_RELEASE);
	printf("returned\n");
	while (getchar() != EOF)
		;
	free(off);
	return 0;
}

/*
 * Claim udp/port and put each frame on the tx ring as it is, as a client
 * that does not use libnetchannel would (which checks the MTU itself);
 * then hold until stdin closes.
 */
static int
raw_frames(const char *sock, long port, int n, char **hex)
{
	struct raw r;
	uint32_t head;

	if (raw_open(sock, port, 0, "rawframes", &r) != 0)
		return 2;
	head = __atomic_load_n(&r.tx->head, __ATOMIC_RELAXED);
	for (int i = 0; i < n && (uint32_t)i < r.h.tx_size; i++, head++) {
		uint32_t slot = head & (r.h.tx_size - 1);
		uint64_t off = r.h.tx_buf_off + (uint64_t)slot * r.h.buf_size;

		r.tx->desc[slot] = (struct nc_desc){
			.offset = (uint32_t)off, .length = (uint32_t)unhex(hex[i], r.cbase + off,
									  r.h.buf_size),
			.channel = r.info.id };
	}
	__atomic_store_n(&r.tx->head, head, __ATOMIC_RELEASE);
	printf("queued %d\n", n);
	fflush(stdout);
	while (getchar() != EOF)
		;
	return 0;
}

/* A frame's UDP destination port (the tests' frames: untagged IPv4, no options), or -1. */
static long
udp_dport(const struct nc_buf *b)
{
	const uint8_t *f = b->data;

	return b->len >= 38 ? (long)(f[36] << 8 | f[37]) : -1;
}

/*
 * Receive from the one ring for `seconds`: a buffer is wrong unless its
 * channel is one we have now (port[id] >= 0) and its UDP port is that
 * channel's. per[id] counts each channel's.
 */
static void
ring_receive(struct nc_client *c, const long *port, uint32_t nport, long *per, double seconds,
	     long *got, long *wrong)
{
	double end = now_s() + seconds;

	while (now_s() < end) {
		struct nc_buf b[32];
		uint16_t n = nc_client_rx_bufs(c, b, 32);

		for (uint16_t i = 0; i < n; i++) {
			uint32_t id = b[i].channel;

			if (id >= nport || port[id] < 0 || udp_dport(&b[i]) != port[id])
				(*wrong)++;
			else
				per[id]++;
		}
		*got += n;
		nc_bufs_release(c, b, n);
	}
}

/*
 * One ring for all (NC_CONNECT_ONE_RING): N channels for UDP ports BASE ..
 * BASE+N-1 (more than the 64 rings a connection has otherwise).
 * 1. 1.5 s of nc_client_rx_bufs(): each packet on its channel, every channel
 *    heard from.
 * 2. The ring left to fill, then the first channel destroyed and another made
 *    for port BASE+N, which gets the same id: 1 s more, and not one packet of
 *    the old channel may come as the new one's.
 * 3. 100 frames by nc_client_recv(), each naming its channel; the calls of
 *    one channel's ring fail with EOPNOTSUPP.
 */
static int
one_ring(const char *sock, long base, long n)
{
	struct nc_client *c = nc_connect(sock, NC_CONNECT_ONE_RING);
	struct nc_channel **ch = calloc((size_t)n, sizeof(*ch));
	uint32_t nport = 1u << 20;
	long *port = malloc(nport * sizeof(*port)), *per = calloc(nport, sizeof(*per));
	long got = 0, wrong = 0, heard = 0, again_got, ok = 0;
	struct nc_buf b;
	uint32_t old_id;
	uint8_t f[2048];

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	if (ch == NULL || port == NULL || per == NULL)
		return 2;
	for (uint32_t i = 0; i < nport; i++)
		port[i] = -1;
	for (long i = 0; i < n; i++) {
		char name[NC_CHANNEL_NAME_SIZE];

		snprintf(name, sizeof(name), "r%ld", i);
		ch[i] = claim(c, name, base + i);
		port[nc_channel_id(ch[i])] = base + i;
	}
	printf("ready %ld\n", n);
	ring_receive(c, port, nport, per, 1.5, &got, &wrong);
	for (long i = 0; i < n; i++)
		heard += per[nc_channel_id(ch[i])] > 0;
	printf("phase1 got %ld wrong %ld heard %ld\n", got, wrong, heard);
	/* The ring fills with every channel's packets, the first channel's among them. */
	usleep(300 * 1000);
	old_id = nc_channel_id(ch[0]);
	port[old_id] = -1;
	if (nc_channel_destroy(ch[0]) != 0)
		return 1;
	ch[0] = claim(c, "again", base + n);
	port[nc_channel_id(ch[0])] = base + n;
	per[nc_channel_id(ch[0])] = 0;
	got = wrong = 0;
	ring_receive(c, port, nport, per, 1.0, &got, &wrong);
	again_got = per[nc_channel_id(ch[0])];
	printf("phase2 same_id %d got %ld wrong %ld again %ld\n", nc_channel_id(ch[0]) == old_id,
	       got, wrong, again_got);
	for (int i = 0; i < 100; i++) {
		uint32_t id = UINT32_MAX;
		ssize_t len = nc_client_recv(c, f, sizeof(f), &id, 2000);
		struct nc_buf fb = { .data = f, .len = len > 0 ? (uint32_t)len : 0 };

		ok += len > 0 && id < nport && port[id] >= 0 && udp_dport(&fb) == port[id];
	}
	errno = 0;
	printf("phase3 recv_ok %ld nc_recv %s nc_rx_bufs %s\n", ok,
	       nc_strerror((int)-nc_recv(ch[1], f, sizeof(f), 0)),
	       nc_rx_bufs(ch[1], &b, 1) == 0 ? nc_strerror(errno) : "returned buffers");
	for (long i = 0; i < n; i++)
		nc_channel_destroy(ch[i]);
	nc_disconnect(c);
	free(ch);
	free(port);
	free(per);
	return 0;
}

/* A ring per channel: deliver channels for BASE .. until N or a refusal, which it prints. */
static int
rings(const char *sock, long base, long n)
{
	struct nc_client *c = nc_connect(sock, 0);
	long i;

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	for (i = 0; i < n; i++) {
		struct nc_rule r = NC_SIZED(nc_rule);
		char name[NC_CHANNEL_NAME_SIZE];

		snprintf(name, sizeof(name), "q%ld", i);
		nc_rule_flow(&r, "udp", NULL, base + i);
		if (nc_channel_create(c, name, &r, NULL) == NULL) {
			printf("created %ld, then: %s (%s)\n", i, nc_strerror(errno),
			       nc_last_reason());
			break;
		}
	}
	if (i == n)
		printf("created %ld\n", n);
	nc_disconnect(c);
	return 0;
}

/*
 * What a client with every rule in hand expects of the classifier: each flow
 * (source, UDP port) seen goes to the live channel of the highest priority
 * whose rule matches it (the churner's priorities are all different). A
 * packet is checked against its flow's last CHURN_STATES answers: one
 * classified just before a change may arrive after it. (A destroy returns
 * after a grace period of the workers, so a packet classified after change c
 * is on the ring before change c + 2, a destroy, returns, and is read by the
 * drain after c + 3 at the latest.) A flow first seen after changes is given
 * the answers it had before them too, from the slots as they were: its
 * first packets may be that old.
 */
#define CHURN_N 120
#define CHURN_FLOWS 4096
#define CHURN_STATES 4
#define NONE UINT32_MAX

struct churn {
	struct nc_rule rule[CHURN_N + 1]; /* by slot; slot 0 is keep */
	uint32_t id[CHURN_N + 1];              /* the slot's channel id, NONE when between */
	struct flow {
		uint32_t src;                  /* host order; 0: an empty entry */
		uint16_t dport;
		uint32_t best;                 /* slot, or NONE */
		uint32_t state[CHURN_STATES];  /* channel ids of the last answers */
		uint32_t heard;                /* packets received */
		bool moved;                    /* its channel just went */
	} flow[CHURN_FLOWS];
	uint32_t nflows, changes;
	struct churn_undo {                    /* change c, at c % CHURN_STATES */
		uint32_t slot, id;             /* the slot and its channel before c */
		struct nc_rule rule;      /* and its rule */
	} undo[CHURN_STATES];
};

/* An IPv4 rule's source address, host order. */
static uint32_t
src4(const struct nc_rule *r)
{
	uint32_t be;

	memcpy(&be, r->src, sizeof(be));
	return ntohl(be);
}

static bool
churn_match(const struct nc_rule *r, uint32_t src, long dport)
{
	return dport >= r->dport.lo && dport <= r->dport.hi &&
	       (r->src_len == 0 || ((src ^ src4(r)) >> (32 - r->src_len)) == 0);
}

/* The slot whose channel a flow goes to with these channels and rules, or NONE. */
static uint32_t
churn_best(const uint32_t *id, const struct nc_rule *rule, uint32_t src, long dport)
{
	uint32_t best = NONE;

	for (uint32_t i = 0; i <= CHURN_N; i++)
		if (id[i] != NONE && churn_match(&rule[i], src, dport) &&
		    (best == NONE || rule[i].priority > rule[best].priority))
			best = i;
	return best;
}

/* Before a change of slot i: what it holds, for churn_learn(). */
static void
churn_changing(struct churn *w, uint32_t i)
{
	struct churn_undo *u = &w->undo[(w->changes + 1) % CHURN_STATES];

	u->slot = i;
	u->id = w->id[i];
	u->rule = w->rule[i];
}

/* After a change of slot i (gone, or new): every flow's answer, and its history. */
static void
churn_changed(struct churn *w, uint32_t i)
{
	const uint32_t g = ++w->changes % CHURN_STATES;

	for (uint32_t f = 0; f < CHURN_FLOWS; f++) {
		struct flow *fl = &w->flow[f];

		if (fl->src == 0)
			continue;
		if (w->id[i] == NONE && fl->best == i)
			fl->best = churn_best(w->id, w->rule, fl->src, fl->dport);
		else if (w->id[i] != NONE && churn_match(&w->rule[i], fl->src, fl->dport) &&
			 (fl->best == NONE || w->rule[i].priority > w->rule[fl->best].priority))
			fl->best = i;
		fl->state[g] = fl->best == NONE ? NONE : w->id[fl->best];
	}
}

/* A flow seen for the first time: its answers now and before the last changes. */
static void
churn_learn(struct churn *w, struct flow *fl)
{
	static uint32_t id[CHURN_N + 1];
	static struct nc_rule rule[CHURN_N + 1];

	memcpy(id, w->id, sizeof(id));
	memcpy(rule, w->rule, sizeof(rule));
	for (uint32_t k = 0; k < CHURN_STATES; k++) {
		const uint32_t c = w->changes - k, b = churn_best(id, rule, fl->src, fl->dport);

		if (k == 0)
			fl->best = b;
		/* Before the first change, the table as it was filled. */
		fl->state[c % CHURN_STATES] = b == NONE ? NONE : id[b];
		if (k < w->changes) {
			/* Change c undone: the slot as it was before it. */
			const struct churn_undo *u = &w->undo[c % CHURN_STATES];

			id[u->slot] = u->id;
			rule[u->slot] = u->rule;
		}
	}
}

/* Is a packet on channel `id` what the table said of its flow lately? */
static bool
churn_check(struct churn *w, const struct nc_buf *b)
{
	const uint8_t *f = b->data;
	uint32_t src, h;
	long dport = udp_dport(b);

	if (b->len < 38 || f[23] != 17)
		return false;
	memcpy(&src, f + 26, 4);
	src = ntohl(src);
	for (h = (src * 2654435761u ^ (uint32_t)dport) % CHURN_FLOWS;; h = (h + 1) % CHURN_FLOWS) {
		struct flow *fl = &w->flow[h];

		if (fl->src == 0 && w->nflows + 1 < CHURN_FLOWS) {
			w->nflows++;
			fl->src = src;
			fl->dport = (uint16_t)dport;
			churn_learn(w, fl);
		}
		if (fl->src == src && fl->dport == dport) {
			fl->heard++;
			for (int k = 0; k < CHURN_STATES; k++)
				if (fl->state[k] == b->channel)
					return true;
			return false;
		}
		if (fl->src == 0)
			return true; /* not a test's traffic: too many flows to follow */
	}
}

/* A packet on keep: the longest wait between two is what an honest flow felt. */
static void
keep_heard(long *keep, double *last, double *gap)
{
	const double now = now_s();

	if (now - *last > *gap)
		*gap = now - *last;
	*last = now;
	(*keep)++;
}

/* Everything waiting on the ring, checked. */
static void
churn_drain(struct nc_client *c, struct churn *w, long *got, long *wrong,
	    long *keep, double *last_keep, double *gap)
{
	struct nc_buf b[32];
	uint16_t n;

	while ((n = nc_client_rx_bufs(c, b, 32)) > 0) {
		for (uint16_t k = 0; k < n; k++) {
			if (!churn_check(w, &b[k]))
				(*wrong)++;
			if (b[k].channel == w->id[0])
				keep_heard(keep, last_keep, gap);
		}
		*got += n;
		nc_bufs_release(c, b, n);
	}
}

/* A firewall-shaped rule: UDP from a prefix of 10/8 (/8 to /28) to a range in lo..hi. */
static void
fw_rule(struct nc_rule *r, long lo, long hi, uint32_t priority)
{
	const uint32_t len = 8 + rnd() % 21, a = (10u << 24 | (rnd() & 0xffffff)) &
						  ~(uint32_t)((1ull << (32 - len)) - 1);
	const long p = lo + (long)(rnd() % (uint32_t)(hi - lo + 1));
	const long q = p + (long)(rnd() % (uint32_t)(hi - p + 1));

	const uint32_t be = htonl(a);

	*r = NC_SIZED(nc_rule, .family = NC_AF_INET, .proto = 17, .proto_mask = 0xff,
		      .src_len = (uint8_t)len,
		      .dport = { (uint16_t)p, (uint16_t)q, NC_PORT_RANGE, 0 });
	memcpy(r->src, &be, sizeof(be));
	r->priority = priority;
}

/*
 * A client as an attacker of the classifier's compiler: one ring for all, a
 * channel "keep" for UDP port BASE from 10/8, and CHURN_N firewall-shaped
 * channels for BASE+1 .. BASE+63, each of its own priority. For SECONDS one
 * is destroyed and another created without pause (each change a rebuild of
 * the daemon's snapshot), and every packet received must be on the channel
 * that the rules in force gave its flow. Prints what it did, what came, what
 * was wrong, and keep's longest wait for a packet; a line on stdin then
 * destroys half of the channels, one every 20 ms, checked the same way, and
 * counts the flows whose channel went that did not come to their next one
 * within those 20 ms (silent); its last channels stay until stdin closes.
 */
static int
churn(const char *sock, long base, double seconds)
{
	struct nc_client *c = nc_connect(sock, NC_CONNECT_ONE_RING);
	static struct nc_channel *ch[CHURN_N + 1];
	static struct churn w;
	long ops = 0, got = 0, wrong = 0, keep = 0, silent = 0;
	double end, last_keep, gap = 0;
	uint32_t serial = 0;
	char line[64];

	if (c == NULL) {
		printf("connect: %s\n", nc_strerror(errno));
		return 2;
	}
	srandom((unsigned int)getpid());
	for (uint32_t i = 0; i <= CHURN_N; i++) {
		/* Different priorities, in no order: an odd multiplier is a bijection mod 2^24. */
		fw_rule(&w.rule[i], base + (i > 0), base + (i > 0 ? 63 : 0),
			(serial * 2654435761u) & NC_PRIORITY_MAX);
		if (i == 0) {
			w.rule[0].src_len = 8;
			memset(w.rule[0].src, 0, sizeof(w.rule[0].src));
			w.rule[0].src[0] = 10;
		}
		snprintf(line, sizeof(line), i == 0 ? "keep" : "fw%u", serial++);
		ch[i] = nc_channel_create(c, line, &w.rule[i], NULL);
		if (ch[i] == NULL) {
			printf("create %s: %s (%s)\n", line, nc_strerror(errno), nc_last_reason());
			return 2;
		}
		w.id[i] = nc_channel_id(ch[i]);
	}
	/* What came while the table was being filled, unchecked; then the flows, learnt. */
	for (end = now_s() + 0.2; now_s() < end;) {
		struct nc_buf b[32];
		uint16_t n = nc_client_rx_bufs(c, b, 32);

		nc_bufs_release(c, b, n);
	}
	last_keep = now_s();
	for (end = now_s() + 0.5; now_s() < end;)
		churn_drain(c, &w, &got, &wrong, &keep, &last_keep, &gap);
	printf("ready %d flows %u wrong %ld\n", CHURN_N + 1, w.nflows, wrong);
	for (end = now_s() + seconds, last_keep = now_s(); now_s() < end; ops++) {
		const uint32_t i = 1 + rnd() % CHURN_N;

		/* A channel goes, another comes: its rule may take any other's flows. */
		churn_changing(&w, i);
		w.id[i] = NONE;
		if (nc_channel_destroy(ch[i]) != 0) {
			printf("destroy: %s\n", nc_strerror(errno));
			return 1;
		}
		churn_changed(&w, i);
		churn_changing(&w, i);
		fw_rule(&w.rule[i], base + 1, base + 63, (serial * 2654435761u) & NC_PRIORITY_MAX);
		snprintf(line, sizeof(line), "fw%u", serial++);
		ch[i] = nc_channel_create(c, line, &w.rule[i], NULL);
		if (ch[i] == NULL) {
			printf("create %s: %s (%s)\n", line, nc_strerror(errno), nc_last_reason());
			return 1;
		}
		w.id[i] = nc_channel_id(ch[i]);
		churn_changed(&w, i);
		churn_drain(c, &w, &got, &wrong, &keep, &last_keep, &gap);
	}
	printf("churned %ld got %ld wrong %ld keep %ld keep_gap_ms %.0f\n", ops, got, wrong, keep,
	       1e3 * (now_s() - last_keep > gap ? now_s() - last_keep : gap));
	if (fgets(line, sizeof(line), stdin) != NULL) {
		/* Deletes alone: the snapshot's answers for them are dead ones. */
		got = wrong = 0;
		for (uint32_t i = 1; i <= CHURN_N / 2; i++) {
			for (uint32_t f = 0; f < CHURN_FLOWS; f++) {
				w.flow[f].moved = w.flow[f].src != 0 && w.flow[f].best == i;
				w.flow[f].heard = 0;
			}
			churn_changing(&w, i);
			w.id[i] = NONE;
			if (nc_channel_destroy(ch[i]) != 0) {
				printf("destroy: %s\n", nc_strerror(errno));
				return 1;
			}
			churn_changed(&w, i);
			for (end = now_s() + 0.02; now_s() < end;)
				churn_drain(c, &w, &got, &wrong, &keep, &last_keep, &gap);
			/* A flow whose channel went reaches the next one at once (some 80 came). */
			for (uint32_t f = 0; f < CHURN_FLOWS; f++)
				silent += w.flow[f].moved && w.flow[f].best != NONE &&
					  w.flow[f].heard == 0;
		}
		printf("destroyed %d got %ld wrong %ld silent %ld\n", CHURN_N / 2, got, wrong,
		       silent);
		while (fgets(line, sizeof(line), stdin) != NULL)
			;
	}
	nc_disconnect(c);
	return 0;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && strcmp(argv[2], "honest") == 0)
		return honest(argv[1], strtol(argv[3], NULL, 0), strtod(argv[4], NULL));
	if (argc == 5 && strcmp(argv[2], "copy") == 0)
		return copy_echo(argv[1], strtol(argv[3], NULL, 0), strtol(argv[4], NULL, 0));
	if (argc == 5 && strcmp(argv[2], "attach") == 0)
		return attach(argv[1], argv[3], strtol(argv[4], NULL, 0));
	if (argc >= 4 && strcmp(argv[2], "frames") == 0)
		return send_frames(argv[1], strtol(argv[3], NULL, 0), argc - 4, argv + 4);
	if (argc >= 4 && strcmp(argv[2], "raw-frames") == 0)
		return raw_frames(argv[1], strtol(argv[3], NULL, 0), argc - 4, argv + 4);
	if (argc == 5 && strcmp(argv[2], "follow") == 0)
		return follow(argv[1], argv[3], argv[4]);
	if (argc == 5 && strcmp(argv[2], "hostile") == 0)
		return hostile(argv[1], strtol(argv[3], NULL, 0), argv[4], 0, false);
	if (argc == 5 && strcmp(argv[2], "hostile-one-ring") == 0)
		return hostile(argv[1], strtol(argv[3], NULL, 0), argv[4], NC_HELLO_F_ONE_RING, false);
	if (argc == 5 && strcmp(argv[2], "hostile-go") == 0)
		return hostile(argv[1], strtol(argv[3], NULL, 0), argv[4], 0, true);
	if (argc == 4 && strcmp(argv[2], "returns") == 0)
		return returns(argv[1], strtol(argv[3], NULL, 0));
	if (argc == 5 && strcmp(argv[2], "onering") == 0)
		return one_ring(argv[1], strtol(argv[3], NULL, 0), strtol(argv[4], NULL, 0));
	if (argc == 5 && strcmp(argv[2], "rings") == 0)
		return rings(argv[1], strtol(argv[3], NULL, 0), strtol(argv[4], NULL, 0));
	if (argc == 5 && strcmp(argv[2], "churn") == 0)
		return churn(argv[1], strtol(argv[3], NULL, 0), strtod(argv[4], NULL));
	fprintf(stderr, "usage: nc_iso_client SOCK honest PORT SECONDS | copy PORT COUNT | "
		"attach NAME COUNT | [raw-]frames PORT HEX... | follow NAME WORD |\n"
		"hostile[-one-ring|-go] PORT SECRET |\n"
		"       returns PORT | onering BASE N | rings BASE N | churn BASE SECONDS\n");
	return 2;
}
