package jsonrpc

import (
	"encoding/json"
	"strconv"
)

// Standard JSON-RPC error codes, and the pool's own in the
// implementation-defined range -32000..-32019.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeBackendUnavailable: the server's child is not running and could
	// not be started, or it is in the failed state.
	CodeBackendUnavailable = -32000
	// CodeRequestTimeout: the child did not answer within requestTimeout.
	CodeRequestTimeout = -32001
	// CodeBackendDied: the child exited after the request was written to
	// it; the request may have executed and was not re-sent.
	CodeBackendDied = -32003
	// CodeOverloaded: the pool refused the request to protect others.
	CodeOverloaded = -32004
	// CodeMessageTooLarge: the message exceeded the pool's size limit.
	CodeMessageTooLarge = -32005
	// CodeNoClient: a server-to-client request found no session to answer.
	CodeNoClient = -32006
	// CodeRequestCancelled: the user cancelled the request in Switchboard.
	CodeRequestCancelled = -32007
)

// Error is a JSON-RPC error object: the one typed value the pool uses for
// every error it answers itself.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *Error) Error() string { return "jsonrpc " + strconv.Itoa(e.Code) + ": " + e.Message }

// AppendResponse appends a complete response line (without the newline)
// carrying result to dst.
func AppendResponse(dst, id, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendErrorResponse appends a complete error response for id (nil means
// null: the id could not be read).
func AppendErrorResponse(dst, id []byte, e *Error) []byte {
	body, err := json.Marshal(e)
	if err != nil {
		body, _ = json.Marshal(&Error{Code: CodeInternalError, Message: e.Message})
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":`...)
	dst = append(dst, body...)
	return append(dst, '}')
}

// AppendRequest appends a request line with a numeric pool id.
func AppendRequest(dst []byte, id uint64, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = AppendUint(dst, id)
	dst = appendMethodParams(dst, method, params)
	return append(dst, '}')
}

// AppendNotification appends a notification line.
func AppendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	dst = appendMethodParams(dst, method, params)
	return append(dst, '}')
}

func appendMethodParams(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `,"method":`...)
	dst = strconv.AppendQuote(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return dst
}

func appendID(dst, id []byte) []byte {
	if len(id) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}
