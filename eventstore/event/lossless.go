package event

import (
	"errors"
	"math"
	"strconv"
)

// ErrNotLossless is wrapped by every CheckLossless failure.
var ErrNotLossless = errors.New("value does not round-trip losslessly through JSON")

// CheckLossless reports why v could not have come from JSON.stringify of a lossless value (the harness's
// json.ts isJsonValue): non-finite numbers and negative zero are rejected. nil when fine.
//
// Of json.ts's rules only the number ones can fail for a parsed value: a parsed tree has no cycles, no
// exotic prototypes, no sparse arrays and no symbol keys. A Value built in Go can still hold NaN, ±Inf or
// -0, which JSON.stringify would silently turn into null or 0.
func CheckLossless(v Value) error {
	if e := checkLossless(v); e != nil {
		e.Path = "$" + e.Path
		return e
	}
	return nil
}

// checkLossless builds the error's path on the way back up, so a valid tree costs no allocation.
func checkLossless(v Value) *LosslessError {
	switch v.Kind {
	case KindNumber:
		switch {
		case math.IsNaN(v.Num) || math.IsInf(v.Num, 0):
			return &LosslessError{Why: "non-finite number " + FormatNumber(v.Num)}
		case v.Num == 0 && math.Signbit(v.Num):
			return &LosslessError{Why: "negative zero"}
		}
	case KindArray:
		for i := range v.Arr {
			if e := checkLossless(v.Arr[i]); e != nil {
				e.Path = "[" + strconv.Itoa(i) + "]" + e.Path
				return e
			}
		}
	case KindObject:
		for i := range v.Obj {
			if e := checkLossless(v.Obj[i].Value); e != nil {
				e.Path = "[" + strconv.Quote(v.Obj[i].Key) + "]" + e.Path
				return e
			}
		}
	}
	return nil
}

// LosslessError locates the first value CheckLossless rejected.
type LosslessError struct {
	Path string // JSONPath-like location, "$" for the root
	Why  string
}

// Error names the offending value and its location.
func (e *LosslessError) Error() string {
	return ErrNotLossless.Error() + ": " + e.Why + " at " + e.Path
}

// Unwrap lets callers test with errors.Is(err, ErrNotLossless).
func (e *LosslessError) Unwrap() error { return ErrNotLossless }
