package event

// Entry points for the tests: the parsers and decoders the backends build on, over one line.

// ParseHeaderMeta is the lenient listing parser (format.ts parseHeaderMeta) over a first line without
// its LF: ok is false when the line is not JSON or not a session header, and foreign versions are not
// refused. Retired baseline fields still fail with ErrRetiredBaseline, as in the harness.
func ParseHeaderMeta(line []byte) (h Header, ok bool, err error) {
	v, perr := Parse(line)
	if perr != nil {
		return Header{}, false, nil
	}
	h, ok = headerFromValue(v)
	if !ok {
		return Header{}, false, nil
	}
	if v.Has("sandboxMode") || v.Has("approvalPolicy") {
		return Header{}, false, ErrRetiredBaseline
	}
	return h, true, nil
}

// DecodeRecord is DecodeStored's events.
func DecodeRecord(raw []byte) ([]Event, error) {
	events, _, err := DecodeStored(raw)
	return events, err
}
