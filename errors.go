package climate

import (
	"errors"
	"fmt"
)

// Code classifies an error; the HTTP layer maps each code to one status.
type Code string

// Error codes.
const (
	CodeInvalid      Code = "invalid"      // bad input: 400
	CodeUnauthorized Code = "unauthorized" // no or bad credentials: 401
	CodeForbidden    Code = "forbidden"    // not allowed: 403
	CodeNotFound     Code = "not_found"    // 404
	CodeConflict     Code = "conflict"     // state or capacity conflict: 409
	CodeTooLarge     Code = "too_large"    // request body too large: 413
	CodeInternal     Code = "internal"     // our fault: 500, details only in the log
	CodeUnavailable  Code = "unavailable"  // a service Climate needs cannot answer: 503
)

// Error is an error with a code and a message fit to show a user.
type Error struct {
	Code    Code
	Message string
	Err     error // underlying cause, for logs; never shown to users
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err: CodeInternal for errors that are not *Error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the user-facing message of err; internal errors get a generic text.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeInternal {
		return e.Message
	}
	return "Internal Server Error"
}

// ErrConflictRetry is returned by a store when a write transaction's re-check finds that a
// resource it was about to allocate is no longer free; the caller may re-plan and retry.
var ErrConflictRetry = &Error{Code: CodeConflict, Message: "resource was booked concurrently"}
