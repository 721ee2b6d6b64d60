package jsonl

// DecodeFrame is decodeFrame without a cap, for the tests that take frames apart.
func DecodeFrame(b []byte, f Frame) ([]byte, error) { return decodeFrame(b, f, 0) }
