/* SPDX-License-Identifier: MIT */
/*
 * wire/frame.h - coro_rpc framing: the 20-byte request header, the
 * 16-byte response header and the transport error codes (the codec's
 * status codes, enum kvf_wire_status, are in wire/spack.h).
 *
 * Every header field is little-endian on the wire; the structs below hold
 * host values. Parsing never reads past the bytes it is given and never
 * allocates.
 *
 * Contract notes (additive changes only; the server codes against this):
 * - kvf_frame_req_parse() validates magic, version and serialize_type; any
 *   failure means "close the connection" (upstream does not answer).
 * - The server checks @length + @attach_length against its own limit
 *   before buffering the body.
 * - Responses: kvf_frame_resp_begin() reserves the header in a
 *   struct kvf_wbuf, the body is encoded after it (wire/msg.h), then
 *   kvf_frame_resp_end() fills in the header with the body length.
 */
#ifndef KVF_SERVER_FRAME_H
#define KVF_SERVER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "wire/spack.h"

#define KVF_FRAME_MAGIC 0x15
#define KVF_FRAME_VERSION 0
#define KVF_FRAME_SERIALIZE_STRUCT_PACK 0
#define KVF_FRAME_REQ_LEN 20
#define KVF_FRAME_RESP_LEN 16

/**
 * enum kvf_rpc_errc - coro_rpc transport status, the response header's
 * err_code. Codes above 255 do not occur in the master's protocol.
 */
enum kvf_rpc_errc {
	KVF_RPC_ERRC_OK = 0,
	KVF_RPC_ERRC_IO_ERROR = 1,
	KVF_RPC_ERRC_NOT_CONNECTED = 2,
	KVF_RPC_ERRC_TIMED_OUT = 3,
	KVF_RPC_ERRC_INVALID_RPC_ARGUMENTS = 4,
	KVF_RPC_ERRC_RPC_THROW_EXCEPTION = 10,
	KVF_RPC_ERRC_FUNCTION_NOT_REGISTERED = 11,
	KVF_RPC_ERRC_PROTOCOL_ERROR = 12,
	KVF_RPC_ERRC_UNKNOWN_PROTOCOL_VERSION = 13,
	KVF_RPC_ERRC_MESSAGE_TOO_LARGE = 14,
	KVF_RPC_ERRC_INVALID_RPC_RESULT = 16,
	KVF_RPC_ERRC_SERIAL_NUMBER_CONFLICT = 17,
};

/* The messages upstream's transport errors carry (struct_pack strings). */
#define KVF_FRAME_MSG_INVALID_ARGS "invalid rpc arg"
#define KVF_FRAME_MSG_NOT_REGISTERED "the rpc function not registered"

/** struct kvf_frame_req - a request header, host byte order. */
struct kvf_frame_req {
	uint8_t magic;
	uint8_t version;
	uint8_t serialize_type;
	uint8_t msg_type;
	uint32_t seq_num;
	uint32_t function_id;
	uint32_t length;	/* body bytes */
	uint32_t attach_length; /* attachment bytes after the body */
};

/** struct kvf_frame_resp - a response header, host byte order. */
struct kvf_frame_resp {
	uint8_t magic;
	uint8_t version;
	uint8_t err_code; /* enum kvf_rpc_errc */
	uint8_t msg_type;
	uint32_t seq_num;
	uint32_t length;
	uint32_t attach_length;
};

/**
 * kvf_frame_req_parse() - decode and validate a request header.
 * @buf: at least %KVF_FRAME_REQ_LEN bytes.
 * @out: the decoded header (filled even on a validation failure).
 *
 * Return: %KVF_WIRE_OK, or %KVF_WIRE_ERR_MAGIC / _VERSION / _SERIALIZE:
 * the connection must be closed without an answer, as upstream does.
 */
int kvf_frame_req_parse(const void *buf, struct kvf_frame_req *out);

/** kvf_frame_req_write() - write @h as 20 wire bytes at @buf. */
void kvf_frame_req_write(void *buf, const struct kvf_frame_req *h);

/**
 * kvf_frame_resp_parse() - decode a response header (client side). The
 * magic is not checked, as upstream's client does not check it.
 */
void kvf_frame_resp_parse(const void *buf, struct kvf_frame_resp *out);

/** kvf_frame_resp_write() - write @h as 16 wire bytes at @buf. */
void kvf_frame_resp_write(void *buf, const struct kvf_frame_resp *h);

/**
 * kvf_frame_resp_begin() - reserve a response header at the end of @w.
 * Return: the header's offset in @w (pass it to kvf_frame_resp_end()).
 * On allocation failure @w is marked failed (see struct kvf_wbuf).
 */
size_t kvf_frame_resp_begin(struct kvf_wbuf *w);

/**
 * kvf_frame_resp_end() - fill in the header reserved at @at: @seq_num,
 * @err_code, and the body length (everything written to @w after it).
 */
void kvf_frame_resp_end(struct kvf_wbuf *w, size_t at, uint32_t seq_num,
			uint8_t err_code);

/**
 * kvf_frame_resp_error() - append a whole transport-error response: the
 * header with @err_code and the struct_pack std::string body @msg, e.g.
 * (%KVF_RPC_ERRC_INVALID_RPC_ARGUMENTS, "invalid rpc arg") as upstream.
 */
void kvf_frame_resp_error(struct kvf_wbuf *w, uint32_t seq_num,
			  uint8_t err_code, const char *msg);

/**
 * kvf_frame_req_begin() / kvf_frame_req_end() - the client-side pair:
 * reserve a request header, encode the body, then fill in the header.
 */
size_t kvf_frame_req_begin(struct kvf_wbuf *w);
void kvf_frame_req_end(struct kvf_wbuf *w, size_t at, uint32_t seq_num,
		       uint32_t function_id);

#endif /* KVF_SERVER_FRAME_H */
