package views

// PackedRows is how many chunk rows the snapshot keeps packed.
func PackedRows(s *Session) int { return len(s.current().rows) }

// SetPackedPieces makes the events view of a packed session come in pieces of at least segment events,
// made on the store's workers from parallelMin events on; it returns a function that restores them.
func SetPackedPieces(segment, parallelMin int) (restore func()) {
	oldSeg, oldMin := packedSegment, packedParallelMin
	packedSegment, packedParallelMin = segment, parallelMin
	return func() { packedSegment, packedParallelMin = oldSeg, oldMin }
}
