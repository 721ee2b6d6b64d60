package eventstore

// GrowTo returns s with room for need values in all, for a list filled from an input of known size:
// share is the fraction of the input consumed once those values are in (0: unknown). Each copy of a list
// of pointers costs a write barrier per pointer while the collector runs, as it does during most of a
// large load, and growing by what each chunk needed (slices.Grow: a quarter at a time) copied a
// 500k-event list about thirty times. So the list doubles while little of the input is known, and once
// share is at least 1/32 it is sized for all of the input at the rate seen so far, with a tenth more.
func GrowTo[T any](s []T, need int, share float64) []T {
	if need <= cap(s) {
		return s
	}
	c := max(need, 2*cap(s))
	if share >= 1.0/32 {
		c = max(need, cap(s)+cap(s)/4, int(float64(need)/share*1.1))
	}
	grown := make([]T, len(s), c)
	copy(grown, s)
	return grown
}

// Trim returns s, or a copy of it of its exact length when more than a quarter of s's capacity is unused:
// for lists that live as long as what they hold, grown ahead by GrowTo.
func Trim[T any](s []T) []T {
	if cap(s)-len(s) <= len(s)/4 {
		return s
	}
	return append(make([]T, 0, len(s)), s...)
}
