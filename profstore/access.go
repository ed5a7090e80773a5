package profstore

import (
	"errors"
	"fmt"
	"os"

	"connectrpc.com/connect"

	"github.com/perfspy/perfspy/agent/storeaccess"
)

// The environment an Access reads its credentials from, and its defaults
// (storeaccess).
const (
	EnvHeaders         = storeaccess.EnvHeaders
	EnvToken           = storeaccess.EnvToken
	EnvTokenFile       = storeaccess.EnvTokenFile
	EnvBasic           = storeaccess.EnvBasic
	EnvBasicFile       = storeaccess.EnvBasicFile
	EnvCACert          = storeaccess.EnvCACert
	DefaultTimeout     = storeaccess.DefaultTimeout
	DefaultMaxResponse = storeaccess.DefaultMaxResponse
)

// Redaction of addresses, headers and names in messages (storeaccess).
var (
	Redact        = storeaccess.Redact
	RedactHeader  = storeaccess.RedactHeader
	SensitiveName = storeaccess.SensitiveName
)

// options are the Connect client options of a's calls: answers over
// MaxResponse are refused.
func options(a *storeaccess.Access) []connect.ClientOption {
	limit := a.MaxResponse
	if limit <= 0 {
		limit = DefaultMaxResponse
	}
	return []connect.ClientOption{connect.WithReadMaxBytes(int(min(limit, int64(^uint32(0)>>1))))}
}

// ErrNoAnswer is a store that did not answer in time or could not be
// reached: the calls after it would fare no better.
var ErrNoAnswer = errors.New("the store did not answer")

// callError names the limit that ended a call, and the flag that raises it.
func callError(a *storeaccess.Access, err error) error {
	var ce *connect.Error
	switch {
	case errors.Is(err, storeaccess.ErrTooLarge), errors.Is(err, storeaccess.ErrRedirect):
		return err
	case errors.As(err, &ce) && ce.Code() == connect.CodeResourceExhausted:
		return fmt.Errorf("the answer is over %d bytes (-store-max-response): %w", a.MaxResponse, err)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ce) && ce.Code() == connect.CodeDeadlineExceeded:
		return fmt.Errorf("%w within %s (-push-timeout): %w", ErrNoAnswer, a.Timeout, err)
	case errors.As(err, &ce) && ce.Code() == connect.CodeUnavailable:
		return fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	return err
}
