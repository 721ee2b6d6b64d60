package fleetsync

// Follow makes s keep its v4 sessions' restore state between passes, as Watch does, for a test that drives
// the passes itself.
func Follow(s *Syncer) {
	s.mu.Lock()
	s.follow = true
	s.mu.Unlock()
}

// V4Cursor is what s's cursor of session id holds: whether there is one of a v4 artifact, the seq it is
// past, whether it keeps the restore state, and whether a read resumed from that state (its checker made).
func V4Cursor(s *Syncer, id string) (ok bool, next int64, kept, resumed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cursors[id]
	if c == nil || c.v4 == nil {
		return false, 0, false, false
	}
	return true, c.next, c.v4.events != nil, c.v4.checker != nil
}
