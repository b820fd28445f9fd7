// SPDX-License-Identifier: MIT
/*
 * ha/etcd.c - etcd v3 over its JSON gateway (libcurl + jansson).
 *
 * Why the gateway: etcd's native API is gRPC, which has no C client on
 * Debian; the gateway that every etcd >= 3.4 serves on its client port
 * maps each unary call to a POST of its protobuf message as JSON, and
 * streams (watch) to a chunked response of newline-separated messages.
 * A lease keep-alive is a unary POST there (one renewal per request), so
 * no long-lived keep-alive stream exists to break: a renewal that fails
 * is simply the next request, on the next endpoint.
 *
 * Concurrency: the client is immutable after kvf_etcd_new() apart from
 * @preferred, the index of the endpoint that answered last, an atomic
 * hint (a stale value only costs one failed attempt). Every call makes
 * its own curl easy handle, so calls from several threads never share a
 * connection; curl is initialised once per process (pthread_once), and
 * runs with CURLOPT_NOSIGNAL (no SIGALRM from its resolver).
 *
 * Failover: a transport failure (refused, reset, timed out) or an
 * "unavailable" answer (HTTP 503 / gRPC code 14: that member has no
 * leader) moves on to the next endpoint; any other answer, success or a
 * definite refusal (gRPC NotFound for a lease), is final. Per request
 * the worst case is one timeout per endpoint.
 *
 * Encoding: keys and values are base64 (RFC 4648, padded); int64 fields
 * are sent and parsed as decimal strings (numbers are accepted too);
 * absent fields read as 0/false, as the gateway omits defaults.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include <kvforge/status.h>

#include "ha/etcd.h"

#define ETCD_DEFAULT_TIMEOUT_MS 2000u
#define ETCD_MAX_RESPONSE (8u << 20) /* far above any answer we ask for */
#define GRPC_NOT_FOUND 5
#define GRPC_UNAVAILABLE 14

struct kvf_etcd {
	char **urls; /* "http://host:port", no trailing slash */
	size_t n;
	unsigned timeout_ms;
	atomic_size_t preferred;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_ret;

static void curl_init(void)
{
	curl_init_ret = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- base64 ---------------------------------------------------------- */

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const void *data, size_t len)
{
	const uint8_t *p = data;
	char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		*o++ = b64_chars[v >> 18 & 63];
		*o++ = b64_chars[v >> 12 & 63];
		*o++ = i + 1 < len ? b64_chars[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? b64_chars[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64_chars, c) : NULL;

	return p ? (int)(p - b64_chars) : -1;
}

/* Decode @s into a malloc'd NUL-terminated buffer; NULL on bad input. */
static char *b64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s), o = 0;
	uint32_t acc = 0;
	int bits = 0;
	char *out;

	if (n % 4)
		return NULL;
	out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int v;

		if (s[i] == '=') {
			if (i < n - 2 || (i == n - 2 && s[n - 1] != '='))
				goto bad;
			break;
		}
		v = b64_val(s[i]);
		if (v < 0)
			goto bad;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)(acc >> bits & 0xff);
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
bad:
	free(out);
	return NULL;
}

/* ---- endpoints ------------------------------------------------------- */

static int add_endpoint(struct kvf_etcd *e, const char *s, size_t len)
{
	const char *colon;
	char *url;

	while (len && isspace((unsigned char)*s))
		s++, len--;
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (!len)
		return KVF_OK; /* "a;;b" or a trailing separator */
	if (len > 7 && !strncmp(s, "http://", 7))
		s += 7, len -= 7;
	else if (memmem(s, len, "://", 3))
		return KVF_ERR_INVALID_ARGUMENT; /* https, unix, ... */
	while (len && s[len - 1] == '/')
		len--;
	colon = memrchr(s, ':', len);
	if (!colon || colon == s || colon + 1 == s + len ||
	    (s[0] == '[' && colon < (const char *)memchr(s, ']', len)))
		return KVF_ERR_INVALID_ARGUMENT;
	for (const char *p = colon + 1; p < s + len; p++)
		if (!isdigit((unsigned char)*p))
			return KVF_ERR_INVALID_ARGUMENT;
	url = malloc(len + 8);
	if (!url)
		return KVF_ERR_NO_MEMORY;
	memcpy(url, "http://", 7);
	memcpy(url + 7, s, len);
	url[len + 7] = '\0';
	e->urls[e->n++] = url;
	return KVF_OK;
}

int kvf_etcd_new(const char *endpoints, unsigned timeout_ms,
		 struct kvf_etcd **out)
{
	struct kvf_etcd *e;
	size_t max = 1;
	const char *p, *start;
	int ret;

	if (!endpoints)
		return KVF_ERR_INVALID_ARGUMENT;
	pthread_once(&curl_once, curl_init);
	if (curl_init_ret != CURLE_OK)
		return KVF_ERR_NO_MEMORY;
	for (p = endpoints; *p; p++)
		max += *p == ';' || *p == ',';
	e = calloc(1, sizeof(*e));
	if (!e || !(e->urls = calloc(max, sizeof(*e->urls)))) {
		free(e);
		return KVF_ERR_NO_MEMORY;
	}
	e->timeout_ms = timeout_ms ? timeout_ms : ETCD_DEFAULT_TIMEOUT_MS;
	for (start = p = endpoints;; p++) {
		if (*p && *p != ';' && *p != ',')
			continue;
		ret = add_endpoint(e, start, (size_t)(p - start));
		if (ret)
			goto err;
		if (!*p)
			break;
		start = p + 1;
	}
	if (!e->n) {
		ret = KVF_ERR_INVALID_ARGUMENT;
		goto err;
	}
	*out = e;
	return KVF_OK;
err:
	kvf_etcd_free(e);
	return ret;
}

void kvf_etcd_free(struct kvf_etcd *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		free(e->urls[i]);
	free(e->urls);
	free(e);
}

size_t kvf_etcd_endpoint_count(const struct kvf_etcd *e)
{
	return e->n;
}

/* ---- one request ------------------------------------------------------ */

struct body {
	char *data;
	size_t len, cap;
	bool too_big;
};

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct body *b = ud;
	size_t n = size * nmemb;

	if (b->len + n + 1 > ETCD_MAX_RESPONSE) {
		b->too_big = true;
		return 0;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d)
			return 0;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

static CURL *easy_for(const struct kvf_etcd *e, size_t at, const char *path,
		      const char *req, struct curl_slist *hdrs)
{
	char url[512];
	CURL *c;

	if (snprintf(url, sizeof(url), "%s%s", e->urls[at], path) >=
	    (int)sizeof(url))
		return NULL;
	c = curl_easy_init();
	if (!c)
		return NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, req);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never via a proxy */
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	return c;
}

/* The gRPC status code of an error answer (0 if it carries none). */
static int grpc_code(json_t *resp)
{
	json_t *code = resp ? json_object_get(resp, "code") : NULL;

	return json_is_integer(code) ? (int)json_integer_value(code) : 0;
}

/*
 * POST @req (JSON text) to @path. On success *@resp is the parsed answer
 * (the caller decrefs). A definite etcd refusal returns %KVF_ERR_IO with
 * *@code set to its gRPC code; no endpoint answering returns %KVF_ERR_IO
 * with *@code 0.
 */
static int call(struct kvf_etcd *e, const char *path, json_t *reqj,
		json_t **resp, int *code)
{
	char *req = json_dumps(reqj, JSON_COMPACT);
	struct curl_slist *hdrs;
	size_t first =
		atomic_load_explicit(&e->preferred, memory_order_relaxed) %
		e->n;
	int ret = KVF_ERR_IO;

	*resp = NULL;
	*code = 0;
	json_decref(reqj);
	if (!req)
		return KVF_ERR_NO_MEMORY;
	hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (!hdrs) {
		free(req);
		return KVF_ERR_NO_MEMORY;
	}
	for (size_t i = 0; i < e->n; i++) {
		size_t at = (first + i) % e->n;
		struct body b = {0};
		CURL *c = easy_for(e, at, path, req, hdrs);
		long http = 0;
		CURLcode cc;
		json_t *j;

		if (!c) {
			ret = KVF_ERR_NO_MEMORY;
			break;
		}
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
		cc = curl_easy_perform(c);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
		curl_easy_cleanup(c);
		j = cc == CURLE_OK && b.data
			    ? json_loadb(b.data, b.len, 0, NULL)
			    : NULL;
		free(b.data);
		if (!j || http == 503 || grpc_code(j) == GRPC_UNAVAILABLE) {
			json_decref(j);
			continue; /* try the next endpoint */
		}
		atomic_store_explicit(&e->preferred, at, memory_order_relaxed);
		if (http == 200) {
			*resp = j;
			ret = KVF_OK;
		} else {
			*code = grpc_code(j);
			json_decref(j);
		}
		break;
	}
	curl_slist_free_all(hdrs);
	free(req);
	return ret;
}

/* An int64 field: a decimal string (the gateway's form), a number, or 0. */
static int64_t get_i64(json_t *obj, const char *name)
{
	json_t *v = obj ? json_object_get(obj, name) : NULL;

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

static json_t *i64_str(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

static json_t *b64_json(const void *data, size_t len)
{
	char *s = b64_encode(data, len);
	json_t *j = s ? json_string(s) : NULL;

	free(s);
	return j;
}

/* ---- key/value --------------------------------------------------------- */

void kvf_etcd_kv_clear(struct kvf_etcd_kv *kv)
{
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static int kv_from_json(json_t *kvj, struct kvf_etcd_kv *kv)
{
	json_t *v = json_object_get(kvj, "value");

	memset(kv, 0, sizeof(*kv));
	kv->value = b64_decode(json_is_string(v) ? json_string_value(v) : "",
			       &kv->len);
	if (!kv->value)
		return KVF_ERR_IO; /* not base64: not an etcd answer */
	kv->create_revision = get_i64(kvj, "create_revision");
	kv->mod_revision = get_i64(kvj, "mod_revision");
	kv->lease = get_i64(kvj, "lease");
	return KVF_OK;
}

int kvf_etcd_get(struct kvf_etcd *e, const void *key, size_t klen,
		 struct kvf_etcd_kv *kv, bool *found)
{
	return kvf_etcd_get_at(e, key, klen, kv, found, NULL);
}

int kvf_etcd_get_at(struct kvf_etcd *e, const void *key, size_t klen,
		    struct kvf_etcd_kv *kv, bool *found, int64_t *revision)
{
	json_t *resp, *kvs;
	int ret, code;

	*found = false;
	ret = call(e, "/v3/kv/range",
		   json_pack("{s:o}", "key", b64_json(key, klen)), &resp,
		   &code);
	if (ret)
		return ret;
	if (revision)
		*revision =
			get_i64(json_object_get(resp, "header"), "revision");
	kvs = json_object_get(resp, "kvs");
	if (json_is_array(kvs) && json_array_size(kvs)) {
		ret = kv_from_json(json_array_get(kvs, 0), kv);
		*found = !ret;
	}
	json_decref(resp);
	return ret;
}

static json_t *put_op(const void *key, size_t klen, const void *value,
		      size_t vlen, int64_t lease)
{
	json_t *put = json_pack("{s:o,s:o}", "key", b64_json(key, klen),
				"value", b64_json(value, vlen));

	if (put && lease)
		json_object_set_new(put, "lease", i64_str(lease));
	return put;
}

static int lease_status(int ret, int code)
{
	return ret == KVF_ERR_IO && code == GRPC_NOT_FOUND
		       ? KVF_ERR_OBJECT_NOT_FOUND
		       : ret;
}

int kvf_etcd_create_all(struct kvf_etcd *e, const struct kvf_etcd_key *keys,
			size_t n, const void *value, size_t vlen, int64_t lease,
			bool *created, int64_t *revision)
{
	json_t *cmp = json_array(), *ops = json_array(), *resp;
	int ret, code;

	*created = false;
	if (!n) {
		json_decref(cmp);
		json_decref(ops);
		return KVF_ERR_INVALID_ARGUMENT;
	}
	/* json_array_append_new() does not append a NULL (out of
	 * memory): the size check below catches it */
	for (size_t i = 0; cmp && ops && i < n; i++) {
		json_array_append_new(
			cmp,
			json_pack("{s:o,s:s,s:s}", "key",
				  b64_json(keys[i].key, keys[i].len), "target",
				  "CREATE", "create_revision", "0"));
		json_array_append_new(ops,
				      json_pack("{s:o}", "request_put",
						put_op(keys[i].key, keys[i].len,
						       value, vlen, lease)));
	}
	if (!cmp || !ops || json_array_size(cmp) != n ||
	    json_array_size(ops) != n) {
		json_decref(cmp);
		json_decref(ops);
		return KVF_ERR_NO_MEMORY;
	}
	ret = call(e, "/v3/kv/txn",
		   json_pack("{s:o,s:o}", "compare", cmp, "success", ops),
		   &resp, &code);
	if (ret)
		return lease_status(ret, code);
	*created = json_is_true(json_object_get(resp, "succeeded"));
	if (*created && revision)
		*revision =
			get_i64(json_object_get(resp, "header"), "revision");
	json_decref(resp);
	return KVF_OK;
}

int kvf_etcd_create(struct kvf_etcd *e, const void *key, size_t klen,
		    const void *value, size_t vlen, int64_t lease,
		    bool *created, int64_t *revision)
{
	struct kvf_etcd_key k = {.key = key, .len = klen};

	return kvf_etcd_create_all(e, &k, 1, value, vlen, lease, created,
				   revision);
}

int kvf_etcd_put(struct kvf_etcd *e, const void *key, size_t klen,
		 const void *value, size_t vlen, int64_t lease)
{
	json_t *resp;
	int ret, code;

	ret = call(e, "/v3/kv/put", put_op(key, klen, value, vlen, lease),
		   &resp, &code);
	json_decref(resp);
	return lease_status(ret, code);
}

int kvf_etcd_delete(struct kvf_etcd *e, const void *key, size_t klen)
{
	json_t *resp;
	int ret, code;

	ret = call(e, "/v3/kv/deleterange",
		   json_pack("{s:o}", "key", b64_json(key, klen)), &resp,
		   &code);
	json_decref(resp);
	return ret;
}

/* ---- leases ------------------------------------------------------------ */

int kvf_etcd_lease_grant(struct kvf_etcd *e, unsigned ttl_s, int64_t *id)
{
	json_t *resp;
	int ret, code;

	if (!ttl_s)
		return KVF_ERR_INVALID_ARGUMENT;
	ret = call(e, "/v3/lease/grant",
		   json_pack("{s:o}", "TTL", i64_str(ttl_s)), &resp, &code);
	if (ret)
		return ret;
	*id = get_i64(resp, "ID");
	json_decref(resp);
	return *id ? KVF_OK : KVF_ERR_IO;
}

/* POST {"ID": @id} to a lease call; *@ttl is the TTL in its answer. */
static int lease_call(struct kvf_etcd *e, const char *path, int64_t id,
		      int64_t *ttl)
{
	json_t *resp, *res;
	int ret, code;

	ret = call(e, path, json_pack("{s:o}", "ID", i64_str(id)), &resp,
		   &code);
	if (ret)
		return lease_status(ret, code);
	/* A keep-alive answers {"result": {...}}, the others flat; absent
	 * means 0. */
	res = json_object_get(resp, "result");
	*ttl = get_i64(res ? res : resp, "TTL");
	json_decref(resp);
	return KVF_OK;
}

int kvf_etcd_lease_keepalive(struct kvf_etcd *e, int64_t id, int64_t *ttl_s)
{
	int64_t ttl;
	int ret = lease_call(e, "/v3/lease/keepalive", id, &ttl);

	if (ret)
		return ret;
	if (ttl_s)
		*ttl_s = ttl;
	/* an expired lease's renewal answers without a TTL */
	return ttl > 0 ? KVF_OK : KVF_ERR_OBJECT_NOT_FOUND;
}

int kvf_etcd_lease_ttl(struct kvf_etcd *e, int64_t id, int64_t *ttl_s)
{
	int64_t ttl;
	int ret = lease_call(e, "/v3/lease/timetolive", id, &ttl);

	if (ret)
		return ret;
	if (ttl_s)
		*ttl_s = ttl;
	/* -1: no such lease; 0 (omitted): expiring now */
	return ttl >= 0 ? KVF_OK : KVF_ERR_OBJECT_NOT_FOUND;
}

int kvf_etcd_lease_revoke(struct kvf_etcd *e, int64_t id)
{
	int64_t ttl;
	int ret = lease_call(e, "/v3/lease/revoke", id, &ttl);

	/* a lease that no longer exists counts as revoked */
	return ret == KVF_ERR_OBJECT_NOT_FOUND ? KVF_OK : ret;
}

/* ---- watch ------------------------------------------------------------- */

struct watch_state {
	struct body b;
	size_t parsed; /* bytes of b consumed as whole messages */
	bool created, fired, broken;
	struct kvf_etcd_event *ev;
};

/* One message of the stream; returns false to end the stream. */
static bool watch_message(struct watch_state *w, json_t *msg)
{
	json_t *res = json_object_get(msg, "result"), *evs, *ev, *kv, *type;

	if (!res) {
		w->broken = true; /* {"error": ...} */
		return false;
	}
	if (json_is_true(json_object_get(res, "canceled"))) {
		w->broken = true; /* compacted, or the member is leaving */
		return false;
	}
	if (json_is_true(json_object_get(res, "created")))
		w->created = true;
	evs = json_object_get(res, "events");
	if (!json_is_array(evs) || !json_array_size(evs))
		return true;
	ev = json_array_get(evs, 0);
	kv = json_object_get(ev, "kv");
	type = json_object_get(ev, "type");
	w->ev->deleted = json_is_string(type) &&
			 !strcmp(json_string_value(type), "DELETE");
	w->ev->create_revision = get_i64(kv, "create_revision");
	w->ev->mod_revision = get_i64(kv, "mod_revision");
	w->ev->lease = get_i64(kv, "lease");
	w->fired = true;
	return false;
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct watch_state *w = ud;
	size_t n = size * nmemb;
	char *nl;

	if (body_write(ptr, size, nmemb, &w->b) != n)
		return 0;
	/* The gateway ends each message with a newline. */
	while ((nl = memchr(w->b.data + w->parsed, '\n',
			    w->b.len - w->parsed))) {
		json_t *msg = json_loadb(w->b.data + w->parsed,
					 (size_t)(nl - w->b.data) - w->parsed,
					 0, NULL);
		bool more;

		w->parsed = (size_t)(nl - w->b.data) + 1;
		if (!msg) {
			w->broken = true;
			return 0;
		}
		more = watch_message(w, msg);
		json_decref(msg);
		if (!more)
			return 0; /* ends the transfer */
	}
	if (w->parsed == w->b.len) { /* keep the buffer small */
		w->b.len = 0;
		w->parsed = 0;
	}
	return n;
}

int kvf_etcd_watch(struct kvf_etcd *e, const void *key, size_t klen,
		   bool prefix, int64_t start_revision, unsigned timeout_ms,
		   struct kvf_etcd_event *ev, bool *fired)
{
	struct watch_state w = {.ev = ev};
	size_t at = atomic_load_explicit(&e->preferred, memory_order_relaxed) %
		    e->n;
	struct curl_slist *hdrs;
	json_t *create;
	char *req = NULL;
	CURL *c = NULL;
	CURLcode cc;
	int ret = KVF_ERR_NO_MEMORY;

	*fired = false;
	create = json_pack("{s:o}", "key", b64_json(key, klen));
	if (create && prefix) {
		/* range_end = the prefix with its last byte incremented
		 * (trailing 0xff bytes dropped), as clientv3.WithPrefix. */
		char *end = malloc(klen ? klen : 1);
		size_t n = klen;

		if (!end)
			goto out_json;
		memcpy(end, key, klen);
		while (n && (uint8_t)end[n - 1] == 0xff)
			n--;
		if (n)
			end[n - 1]++;
		else
			end[n++] = '\0'; /* all keys */
		json_object_set_new(create, "range_end", b64_json(end, n));
		free(end);
	}
	if (create && start_revision)
		json_object_set_new(create, "start_revision",
				    i64_str(start_revision));
	if (create) {
		json_t *msg = json_pack("{s:o}", "create_request", create);

		create = NULL; /* the message owns it now */
		req = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
		json_decref(msg);
	}
	if (!req)
		goto out_json;
	hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (!hdrs)
		goto out_req;
	c = easy_for(e, at, "/v3/watch", req, hdrs);
	if (!c)
		goto out_hdrs;
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
	cc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	if (w.fired) {
		*fired = true;
		ret = KVF_OK;
	} else if (cc == CURLE_OPERATION_TIMEDOUT && w.created) {
		ret = KVF_OK; /* nothing changed */
	} else {
		/* Refused, broken or never created: the next call starts on
		 * the next endpoint. */
		atomic_compare_exchange_strong(&e->preferred, &at,
					       (at + 1) % e->n);
		ret = KVF_ERR_IO;
	}
out_hdrs:
	curl_slist_free_all(hdrs);
out_req:
	free(req);
out_json:
	json_decref(create);
	free(w.b.data);
	return ret;
}
